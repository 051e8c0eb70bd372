"""asr-batch: convert AI coding-agent transcript archives into ASR Parquet tables."""

from batch.pipeline import ConvertResult, convert
from batch.version import FORMAT_NAME, FORMAT_VERSION, VERSION

__version__ = VERSION

__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "ConvertResult", "__version__", "convert"]
