class ConvertError(Exception):
    """Something in the checkpoint the converter does not recognise; the message names the file and field."""
