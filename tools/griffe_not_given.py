"""A griffe extension for the API reference (mkdocs.yml): a parameter whose default is the
package's "not given" sentinel shows that default as the sentinel prints, `<not given>`, not as
the private name the source spells (`_arguments.NOT_GIVEN`)."""

from __future__ import annotations

from typing import Any

import griffe

SENTINEL_NAME = "NOT_GIVEN"
SHOWN = "<not given>"  # repr(jax_triton_rocm.checks._arguments.NOT_GIVEN)


class NotGivenDefaults(griffe.Extension):
    def on_function_instance(self, *, func: griffe.Function, **kwargs: Any) -> None:
        for parameter in func.parameters:
            if str(parameter.default).rsplit(".", 1)[-1] == SENTINEL_NAME:
                parameter.default = SHOWN
