"""Errors that reach the user as one sentence (the CLI prints them and exits 2)."""


class DetectCachesError(Exception):
    """Base class: the message is a complete, user-facing sentence."""


class InputError(DetectCachesError):
    """A file or argument given by the user is unusable."""


class DeviceError(DetectCachesError):
    """No usable GPU, or a launch or allocation failed."""
