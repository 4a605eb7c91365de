"""Name and document embeddings of every node of an SKB (``docs/design.md``, Embeddings).

On disk (one directory, written with :func:`grasp_core.io.atomic_dir`)::

    name.npy        float16 [N, dim]   node names, truncated at ``EncoderConfig.name_max_tokens``
    doc.npy         float16 [N, dim]   ``skb.document(i)`` (type + name + text fields + aliases), ``doc_max_tokens``
    alias.npy       float16 [A, dim]   every alias of the ``aliases`` column (``SKB.alias_pairs``), ``name_max_tokens``
    alias_owner.npy int64 [A]          the node each alias vector names
    name.keys.npy   uint8 [N, 16]      XXH3-128 of each row's name text (what its vector was encoded from)
    doc.keys.npy    uint8 [N, 16]      the same for the documents
    alias.keys.npy  uint8 [A, 16]      the same for the aliases
    meta.json       encoder identity, token limits, N, A, dim, sha256 of the name, doc and alias texts

The name index searches names and aliases together (a node's name score is the max over them,
:mod:`grasp_core.embed.vector_index`); an SKB without aliases has ``A = 0``.

Building is incremental: a vector of the previous artifact in ``out_dir`` (when it verifies against its
manifest) is reused for every row whose (encoder identity, token limit, text hash) it was encoded with, so
editing a few node texts re-encodes only those (``benchmarks/results/incremental_embeddings.json``); a reused
vector is the stored float16 row itself, and :meth:`Encoder.encode` computes a text alone the same as in any
batch, so the result equals a full rebuild. It is also resumable: the texts left to encode are encoded in
chunks, each saved under ``.<out_dir>.work/`` next to ``out_dir`` with a file name derived from a hash of
(encoder identity, token limit, chunk texts). A rerun after an interruption reuses exactly the chunks whose
texts and encoder are unchanged; anything else is re-encoded. The work directory is removed once the final
directory is in place.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import xxhash
from tqdm.auto import tqdm

from grasp_core import manifest
from grasp_core.embed.config import EncoderConfig
from grasp_core.embed.encoder import Encoder
from grasp_core.errors import CorruptArtifactError, GraspError, MissingArtifactError
from grasp_core.io import atomic_dir, atomic_file, is_complete, read_json, write_json
from grasp_core.skb.format import SKB

KINDS = ("name", "doc")  # the index kinds; alias vectors belong to the name index
ALIAS = "alias"
ENCODED = (*KINDS, ALIAS)  # every text list that is encoded
CHUNK_SIZE = 4096


@dataclass
class NodeEmbeddings:
    name: np.ndarray  # float32 [N, dim], L2-normalized
    doc: np.ndarray  # float32 [N, dim], L2-normalized
    identity: str
    meta: dict
    alias: np.ndarray | None = None  # float32 [A, dim], L2-normalized; None = no aliases
    alias_owner: np.ndarray | None = None  # int64 [A]: the node of each alias vector

    def name_vectors(self) -> tuple[np.ndarray, np.ndarray]:
        """(vectors, owner node ids) of every name and alias: what the name index holds."""
        own = np.arange(len(self.name), dtype=np.int64)
        if self.alias is None or not len(self.alias):
            return self.name, own
        assert self.alias_owner is not None
        return np.concatenate([self.name, self.alias]), np.concatenate([own, self.alias_owner])

    def of(self, kind: str) -> np.ndarray:
        if kind not in KINDS:
            raise ValueError(f"embedding kind must be one of {KINDS}, not {kind!r}")
        return self.name if kind == "name" else self.doc


def texts_hash(texts: Sequence[str]) -> str:
    """sha256 of a list of texts (each text's UTF-8 bytes followed by a NUL separator)."""
    h = hashlib.sha256()
    for t in texts:
        h.update(t.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()


def node_texts(skb: SKB) -> dict[str, list[str]]:
    """The texts that are embedded: node names, node documents and aliases (in ``SKB.alias_pairs`` order)."""
    return {
        "name": skb.nodes["name"].astype(str).tolist(),
        "doc": skb.documents(),
        ALIAS: [a for _, a in skb.alias_pairs()],
    }


def _expected_meta(texts: dict[str, list[str]], encoder: Encoder, cfg: EncoderConfig) -> dict:
    return {
        "identity": encoder.identity,
        "dim": encoder.dim,
        "num_nodes": len(texts["name"]),
        "name_max_tokens": cfg.name_max_tokens,
        "doc_max_tokens": cfg.doc_max_tokens,
        "name_hash": texts_hash(texts["name"]),
        "doc_hash": texts_hash(texts["doc"]),
        "num_aliases": len(texts[ALIAS]),
        "alias_hash": texts_hash(texts[ALIAS]),
    }


def embeddings_are_current(
    out_dir: str | Path, skb: SKB, encoder: Encoder, cfg: EncoderConfig = EncoderConfig()
) -> bool:
    """True when ``out_dir`` is complete and was built from these texts with this encoder and token limits."""
    out_dir = Path(out_dir)
    if not is_complete(out_dir) or not (out_dir / "meta.json").is_file():
        return False
    return read_json(out_dir / "meta.json") == _expected_meta(node_texts(skb), encoder, cfg)


def build_node_embeddings(
    skb: SKB, encoder: Encoder, out_dir: str | Path, cfg: EncoderConfig = EncoderConfig(), chunk_size: int = CHUNK_SIZE
) -> Path:
    """Encode names and documents of every node into ``out_dir`` (skipped when already current)."""
    out_dir = Path(out_dir)
    texts = node_texts(skb)
    meta = _expected_meta(texts, encoder, cfg)
    if is_complete(out_dir) and (out_dir / "meta.json").is_file() and read_json(out_dir / "meta.json") == meta:
        return out_dir
    previous = _previous(out_dir, encoder, cfg)
    work = out_dir.parent / f".{out_dir.name}.work"
    work.mkdir(parents=True, exist_ok=True)
    limits = _limits(cfg)
    vectors = {kind: np.zeros((len(texts[kind]), encoder.dim), np.float16) for kind in ENCODED}
    keys = {kind: text_keys(texts[kind]) for kind in ENCODED}
    todo = {kind: _reuse(previous.get(kind), keys[kind], vectors[kind]) for kind in ENCODED}
    chunks = [(kind, start) for kind in ENCODED for start in range(0, len(todo[kind]), chunk_size)]
    used = set()
    for kind, start in tqdm(chunks, desc=f"embed {out_dir.name}", unit="chunk"):
        rows = todo[kind][start : start + chunk_size]
        chunk = [texts[kind][i] for i in rows]
        key = texts_hash([encoder.identity, str(limits[kind]), *chunk])[:24]
        file = work / f"{kind}-{start:09d}-{key}.npy"
        used.add(file.name)
        encoded = _load_chunk(file, len(chunk), encoder.dim)
        if encoded is None:
            encoded = encoder.encode(chunk, limits[kind]).astype(np.float16)
            with atomic_file(file, "wb") as handle:
                np.save(handle, encoded)
        vectors[kind][rows] = encoded
    for stale in work.iterdir():  # chunks of an older encoder or older texts
        if stale.name not in used:
            stale.unlink()
    with atomic_dir(out_dir) as tmp:
        for kind in ENCODED:
            np.save(tmp / f"{kind}.npy", vectors[kind])
            np.save(tmp / f"{kind}.keys.npy", keys[kind])
        np.save(tmp / "alias_owner.npy", np.asarray([i for i, _ in skb.alias_pairs()], np.int64))
        write_json(tmp / "meta.json", meta)
    shutil.rmtree(work, ignore_errors=True)
    return out_dir


def _limits(cfg: EncoderConfig) -> dict[str, int]:
    """The token limit each kind of text is encoded with (aliases are names)."""
    return {"name": cfg.name_max_tokens, "doc": cfg.doc_max_tokens, ALIAS: cfg.name_max_tokens}


def text_keys(texts: Sequence[str]) -> np.ndarray:
    """XXH3-128 of each text's UTF-8 bytes: uint8 [n, 16]."""
    out = np.zeros((len(texts), 16), np.uint8)
    if texts:
        out[:] = np.frombuffer(b"".join(xxhash.xxh3_128_digest(t.encode("utf-8")) for t in texts), np.uint8).reshape(
            -1, 16
        )
    return out


def _previous(out_dir: Path, encoder: Encoder, cfg: EncoderConfig) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """(text keys, float16 vectors) per kind of the artifact in ``out_dir`` that this encoder can reuse: intact,
    same encoder identity and dimension, same token limit for that kind. Empty when there is none."""
    if not is_complete(out_dir):
        return {}
    try:
        manifest.verify(out_dir, deep=True)
        meta = read_json(out_dir / "meta.json")
        if meta.get("identity") != encoder.identity or meta.get("dim") != encoder.dim:
            return {}
        found = {}
        limit_of = {"name": "name_max_tokens", "doc": "doc_max_tokens", ALIAS: "name_max_tokens"}
        for kind in ENCODED:
            if meta.get(limit_of[kind]) == _limits(cfg)[kind] and (out_dir / f"{kind}.keys.npy").exists():
                keys, vectors = np.load(out_dir / f"{kind}.keys.npy"), np.load(out_dir / f"{kind}.npy")
                if keys.shape == (len(vectors), 16) and vectors.dtype == np.float16:
                    found[kind] = (keys, vectors)
        return found
    except (GraspError, OSError, ValueError, EOFError):  # corrupt, or written before text keys: encode anew
        return {}


def _reuse(previous: tuple[np.ndarray, np.ndarray] | None, keys: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Copy into ``out`` the previous vector of every row whose text key it has; return the rows left to encode."""
    if previous is None:
        return np.arange(len(keys))
    old_keys, old_vectors = previous
    position = {k: i for i, k in enumerate(map(bytes, old_keys))}
    found = np.array([position.get(k, -1) for k in map(bytes, keys)], np.int64)
    hit = found >= 0
    out[hit] = old_vectors[found[hit]]
    return np.flatnonzero(~hit)


def _load_chunk(file: Path, rows: int, dim: int) -> np.ndarray | None:
    """A finished chunk, or None when it is absent or unreadable (then it is re-encoded)."""
    if not file.exists():
        return None
    try:
        vectors = np.load(file)
    except (ValueError, OSError, EOFError):
        return None
    return vectors if vectors.shape == (rows, dim) and vectors.dtype == np.float16 else None


def load_node_embeddings(out_dir: str | Path) -> NodeEmbeddings:
    """Read a directory written by :func:`build_node_embeddings` as float32 arrays."""
    out_dir = Path(out_dir)
    if not is_complete(out_dir):
        raise MissingArtifactError(
            f"node embeddings at {out_dir} are missing or incomplete; build them with build_node_embeddings"
        )
    try:
        meta = read_json(out_dir / "meta.json")
    except (OSError, ValueError) as exc:
        raise CorruptArtifactError(f"{out_dir / 'meta.json'}: unreadable ({exc}); rebuild the embeddings") from exc
    arrays = {}
    for kind in (*KINDS, ALIAS):
        rows = meta.get("num_aliases", 0) if kind == ALIAS else meta.get("num_nodes")
        array = _load_array(out_dir / f"{kind}.npy", (rows, meta.get("dim")), absent_ok=kind == ALIAS and not rows)
        arrays[kind] = _unit_rows(array)
    owner = _load_array(out_dir / "alias_owner.npy", (len(arrays[ALIAS]),), absent_ok=not len(arrays[ALIAS]))
    return NodeEmbeddings(arrays["name"], arrays["doc"], meta["identity"], meta, arrays[ALIAS], owner.astype(np.int64))


def _unit_rows(array: np.ndarray, chunk: int = 2048) -> np.ndarray:
    """float32 rows of unit norm, so that inner product is cosine again after float16 on disk; ``chunk`` rows at a
    time (the same values as the whole array at once, without its two temporaries of the array's size)."""
    out = np.empty(array.shape, np.float32)
    for start in range(0, len(array), chunk):
        rows = array[start : start + chunk].astype(np.float32)
        np.divide(rows, np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12), out=out[start : start + chunk])
    return out


def _load_array(file: Path, expected: tuple, absent_ok: bool) -> np.ndarray:
    """The array in ``file`` with shape ``expected``; an empty one when the file is absent and that is allowed."""
    if absent_ok and not file.exists():
        return np.zeros(tuple(0 if d is None else d for d in expected), np.float32)
    try:
        array = np.load(file)
    except (ValueError, OSError, EOFError) as exc:
        raise CorruptArtifactError(f"{file}: not a readable .npy file ({exc}); rebuild the embeddings") from exc
    if array.shape != expected:
        raise CorruptArtifactError(f"{file}: shape {array.shape}, meta.json says {expected}; rebuild the embeddings")
    return array
