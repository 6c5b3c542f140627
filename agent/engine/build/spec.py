"""What a candidate asks to have compiled, normalised so that equal requests hash equally."""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass


def _strings(value: str | list[str] | tuple[str, ...] | None) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    return tuple(str(v) for v in value)


@dataclass(frozen=True)
class InlineExtension:
    """One `torch.utils.cpp_extension.load_inline` call, as KernelBench candidates make it."""

    name: str
    cpp_sources: tuple[str, ...]
    cuda_sources: tuple[str, ...] = ()
    # load_inline takes a list of names or a {name: docstring} dict; kept as (name, doc) pairs.
    functions: tuple[tuple[str, str], ...] | None = None
    extra_cflags: tuple[str, ...] = ()
    extra_cuda_cflags: tuple[str, ...] = ()
    extra_ldflags: tuple[str, ...] = ()
    extra_include_paths: tuple[str, ...] = ()
    with_cuda: bool = False
    no_implicit_headers: bool = False

    @classmethod
    def from_load_inline(
        cls,
        name: str,
        cpp_sources: str | list[str],
        cuda_sources: str | list[str] | None = None,
        functions: list[str] | dict[str, str] | str | None = None,
        extra_cflags: list[str] | None = None,
        extra_cuda_cflags: list[str] | None = None,
        extra_ldflags: list[str] | None = None,
        extra_include_paths: list[str] | None = None,
        with_cuda: bool | None = None,
        no_implicit_headers: bool = False,
        **_ignored: object,  # verbose, build_directory, keep_intermediates...: not part of what is built
    ) -> InlineExtension:
        if isinstance(functions, str):
            functions = [functions]
        if isinstance(functions, dict):
            pairs: tuple[tuple[str, str], ...] | None = tuple((str(k), str(v)) for k, v in functions.items())
        elif functions is None:
            pairs = None
        else:
            pairs = tuple((str(f), "") for f in functions)
        cuda = _strings(cuda_sources)
        return cls(
            name=str(name),
            cpp_sources=_strings(cpp_sources),
            cuda_sources=cuda,
            functions=pairs,
            extra_cflags=_strings(extra_cflags),
            extra_cuda_cflags=_strings(extra_cuda_cflags),
            extra_ldflags=_strings(extra_ldflags),
            extra_include_paths=_strings(extra_include_paths),
            with_cuda=bool(cuda) if with_cuda is None else bool(with_cuda),
            no_implicit_headers=bool(no_implicit_headers),
        )

    def content(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: object) -> InlineExtension:
        """A request as a sandboxed job reported it (untrusted data): exactly the fields, of exactly the types,
        bounded in size; anything else raises ValueError."""
        if not isinstance(data, dict) or set(data) != {f for f in cls.__dataclass_fields__}:
            raise ValueError("an extension request must have exactly the fields of InlineExtension")
        if len(json.dumps(data)) > MAX_REQUEST_BYTES:
            raise ValueError(f"an extension request is larger than {MAX_REQUEST_BYTES} bytes")

        def strings(name: str) -> tuple[str, ...]:
            value = data[name]
            if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"{name} must be a list of strings")
            return tuple(value)

        functions = data["functions"]
        if functions is not None:
            if not isinstance(functions, (list, tuple)) or not all(
                    isinstance(f, (list, tuple)) and len(f) == 2 and all(isinstance(v, str) for v in f) for f in functions):
                raise ValueError("functions must be a list of [name, doc] pairs")
            functions = tuple((str(n), str(d)) for n, d in functions)
        for name in ("name",):
            if not isinstance(data[name], str):
                raise ValueError(f"{name} must be a string")
        for name in ("with_cuda", "no_implicit_headers"):
            if not isinstance(data[name], bool):
                raise ValueError(f"{name} must be a boolean")
        return cls(name=data["name"], cpp_sources=strings("cpp_sources"), cuda_sources=strings("cuda_sources"),
                   functions=functions, extra_cflags=strings("extra_cflags"), extra_cuda_cflags=strings("extra_cuda_cflags"),
                   extra_ldflags=strings("extra_ldflags"), extra_include_paths=strings("extra_include_paths"),
                   with_cuda=data["with_cuda"], no_implicit_headers=data["no_implicit_headers"])


# A reported build request larger than this is refused (KernelBench sources are a few KiB).
MAX_REQUEST_BYTES = 4 << 20


@dataclass(frozen=True)
class NvrtcKernel:
    """One `torch.cuda._compile_kernel` request (NVRTC source to PTX/CUBIN)."""

    source: str
    kernel_name: str
    compute_capability: str
    include_dirs: tuple[str, ...] = ()
    options: tuple[str, ...] = ()

    def content(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


def content_key(*parts: str) -> str:
    """The cache key: sha256 over everything that changes the build's output."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()
