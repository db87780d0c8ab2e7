"""The mutating admission webhook: it writes zeroscaler's annotations onto workloads whose
authors never heard of zeroscaler, from the administrators' policy and their ServiceAccounts' RBAC.
"""

# This folder is zeroscaler.webhook; zeroscaler/webhook links to it. Imported by its bare name
# too, each module would load twice, under two names, with two copies of its state.
if __name__ != "zeroscaler.webhook":
    raise ImportError(f"{__name__} is imported as zeroscaler.webhook, never by the folder's name")
