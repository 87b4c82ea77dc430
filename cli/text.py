"""Text from the store (file names, documents) made safe to print: one line, no control characters."""


def printable(text: str) -> str:
    """`text` with every non-printable character (a newline in a file name, an escape sequence)
    written as its Python escape, so that it cannot fake or break an output line."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in str(text))
