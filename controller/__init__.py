"""The scaler: sleeps idle operators and wakes them on the first change to what they watch."""

# This folder is zeroscaler.controller; zeroscaler/controller links to it. Imported by its bare name
# too, each module would load twice, under two names, with two copies of its state.
if __name__ != "zeroscaler.controller":
    raise ImportError(
        f"{__name__} is imported as zeroscaler.controller, never by the folder's name"
    )
