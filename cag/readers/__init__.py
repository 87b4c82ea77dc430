"""Reader adapters: small LoRAs that teach a generator to read caches it did not compute in one
sequence (its own independently prefilled chunks, or another model's translated caches), active
only on the tokens it computes after the stored context. See docs/readers.md."""

from cag.readers.checkpoint import (NATIVE, Reader, ReaderSpec, load_reader, read_record, record_qa,
                                    save_reader)
from cag.readers.lora import (ATTENTION, MLP, attach, inject, load_lora_state, lora_parameters, lora_state,
                              lora_targets, reading)
from cag.readers.registry import FoundReader, file_stem, find_reader, install, reader_dirs

__all__ = ["ATTENTION", "MLP", "NATIVE", "FoundReader", "Reader", "ReaderSpec", "attach", "file_stem",
           "find_reader", "inject", "install", "load_lora_state", "load_reader", "lora_parameters", "lora_state",
           "lora_targets", "read_record", "reader_dirs", "reading", "record_qa", "save_reader"]
