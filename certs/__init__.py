"""Certificate authority and serving certificates for the webhook (and the local control plane)."""

# This folder is zeroscaler.certs; zeroscaler/certs links to it. Imported by its bare name
# too, each module would load twice, under two names, with two copies of its state.
if __name__ != "zeroscaler.certs":
    raise ImportError(f"{__name__} is imported as zeroscaler.certs, never by the folder's name")
