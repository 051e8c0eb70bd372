"""Version of this producer and of the format it writes."""

PRODUCER = "asr-batch"
VERSION = "0.1.0"
FORMAT_NAME = "asr"
FORMAT_VERSION = "0.1"
