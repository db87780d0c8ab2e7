"""The mutating admission webhook: it writes zeroscaler's annotations onto workloads whose
authors never heard of zeroscaler, from the administrators' policy and their ServiceAccounts' RBAC.
"""
