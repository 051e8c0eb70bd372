"""Version of this producer and of the format it writes."""

PRODUCER = "asr-batch"
VERSION = "0.5.0"
FORMAT_NAME = "asr"
FORMAT_VERSION = "0.1"
# What an output holds and where (docs/asr-tables.md, "An output is a source"): every later version
# reads an output of this format or an earlier one, and refuses one of a later format.
ARCHIVE_FORMAT = 3
