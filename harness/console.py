"""What the command line lets libraries print. By default only the harness's own lines and the
progress of long one-time work (a GGUF file's conversion for transformers): not transformers'
warnings and "Loading weights" bars, not llama.cpp's loader log, not Python warnings raised inside
the libraries. `--verbose` shows all of it. Called by the commands that load models, before they do.
What it does not do: print anything itself.
"""

from __future__ import annotations

import logging
import warnings

LIBRARIES = r"(transformers|torch|accelerate|huggingface_hub|llama_cpp|gguf)(\..*)?$"


def library_output(verbose: bool) -> None:
    from transformers.utils import logging as hf_logging

    logging.getLogger("llama-cpp-python").setLevel(logging.DEBUG if verbose else logging.ERROR)
    if verbose:
        hf_logging.set_verbosity_warning()
        hf_logging.enable_progress_bar()
        return
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    warnings.filterwarnings("ignore", module=LIBRARIES)
