"""``grasp data fetch amazon|mag|prime``: the STaRK processed SKB and its questions from the Hugging Face hub, the
way stark-qa downloads them, put where :func:`grasp_core.sources.stark.find_stark_dirs` reads them.

stark-qa (``stark_qa/skb/{amazon,mag,prime}.py``, ``stark_qa/retrieval/dataset.py``) downloads with
``huggingface_hub.hf_hub_download`` from the dataset repository ``snap-stanford/stark``: ``skb/<name>/processed.zip``
(unzipped into ``load_skb``'s ``<root>/<name>``) and the files of ``qa/<name>/`` (copied into ``load_qa``'s
``<root>/<name>``). Importing stark-qa takes most of a minute (it loads torch_geometric and ogb), so this module makes
the same ``hf_hub_download`` calls itself; ``tests/sources/test_stark_fetch.py`` checks the names against stark-qa's
sources. The downloads land in the Hugging Face cache (``$HF_HOME``, its usual layout, reused by every later call and
by ``HF_HUB_OFFLINE=1``), then:

- the archive is verified (every member's CRC) and unzipped into ``<stark_root>/<name>/`` (through a temporary
  folder, so an interrupted fetch leaves no half-written ``processed/``), and every processed file the loader reads
  must be there;
- the QA files the loader reads are copied into ``<stark_qa_root>/<name>/{stark_qa,split}/`` and parsed;
- files already in place (in any layout the loader accepts) are not downloaded again.

Where the hub cannot be reached (no network, ``HF_HUB_OFFLINE=1`` with nothing cached, a proxy refusing), the error is
one line naming the URLs to download by hand and the folder to put them in.
"""

from __future__ import annotations

import logging
import shutil
import uuid
import zipfile
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

from grasp_core.errors import GraspError
from grasp_core.sources.stark import (
    HUMAN_CSV,
    QA_CSV,
    STARK_NAMES,
    expected_files,
    load_stark_queries,
    qa_candidates,
    skb_candidates,
)

REPO = "snap-stanford/stark"  # stark_qa.skb.*.DATASET["repo"], stark_qa.retrieval.dataset.STARK_QA_DATASET["repo"]
QA_FOLDER = "qa"  # stark_qa.retrieval.dataset.STARK_QA_DATASET["folder"]
# the files of qa/<name>/ the loader reads (stark-qa's load_qa also reads split/test-0.1.index, a 10% test subset)
QA_FILES = (QA_CSV, HUMAN_CSV, "split/train.index", "split/val.index", "split/test.index")


def processed_file(name: str) -> str:
    """The archive's path in the dataset repository (stark_qa.skb.<name>.DATASET["processed"])."""
    return f"skb/{name}/processed.zip"


def hub_url(file: str) -> str:
    """Where a file of the dataset repository downloads from (``$HF_ENDPOINT`` when set)."""
    from huggingface_hub import constants

    return f"{constants.ENDPOINT}/datasets/{REPO}/resolve/main/{file}"


def fetch_stark(
    name: str, stark_root: str | Path, qa_root: str | Path, log: Callable[[str], None] = print
) -> tuple[Path, Path]:
    """Download (or find in place) STaRK ``name``'s processed files and QA files, verify them, and return the
    (skb_dir, qa_dir) :func:`grasp_core.sources.stark.load_stark_skb` reads. Raises one-line :class:`GraspError`\\ s."""
    if name not in STARK_NAMES:
        raise GraspError(f"`grasp data fetch` takes a STaRK dataset ({', '.join(STARK_NAMES)}), not {name!r}")
    skb_dir = _skb_in_place(name, stark_root)
    qa_dir = _qa_in_place(name, qa_root)
    manual = _manual(name, Path(stark_root) / name, Path(qa_root) / name, skb_dir is None, qa_dir is None)
    if qa_dir is None:
        qa_dir = Path(qa_root) / name
        for file in QA_FILES:
            _place_file(_download(f"{QA_FOLDER}/{name}/{file}", manual), qa_dir / file)
        log(f"downloaded the {name} questions into {qa_dir}")
    else:
        log(f"the {name} questions are in place in {qa_dir}")
    if skb_dir is None:
        skb_dir = Path(stark_root) / name
        archive = _download(processed_file(name), manual)
        log(f"verifying {archive} ({archive.stat().st_size / 2**20:,.0f} MiB)")
        _unzip_verified(archive, skb_dir)
        absent = [str(f) for f in expected_files(name, skb_dir) if not f.is_file()]
        if absent:
            raise GraspError(
                f"{processed_file(name)} of {REPO} unzipped into {skb_dir} without {', '.join(absent)}: the loader "
                f"cannot read this release (compare stark_qa/skb/{name}.py with grasp_core/sources/stark.py)"
            )
        log(f"unzipped the {name} processed files into {skb_dir}")
    else:
        log(f"the {name} processed files are in place in {skb_dir}")
    queries = load_stark_queries(name, qa_dir)  # parses every QA file the loader reads
    counts = ", ".join(f"{split} {n:,}" for split, n in queries["split"].value_counts(sort=False).items())
    log(f"verified: {len(expected_files(name, skb_dir))} processed files, {len(queries):,} questions ({counts})")
    return skb_dir, qa_dir


def _skb_in_place(name: str, stark_root: str | Path) -> Path | None:
    """The first folder the loader would read that holds every processed file it needs."""
    for folder in skb_candidates(name, stark_root):
        if all(f.is_file() for f in expected_files(name, folder)):
            return folder
    return None


def _qa_in_place(name: str, qa_root: str | Path) -> Path | None:
    for folder in qa_candidates(name, qa_root):
        if all((folder / f).is_file() for f in QA_FILES):
            return folder
    return None


def _manual(name: str, skb_dir: Path, qa_dir: Path, skb: bool, qa: bool) -> str:
    """What to download by hand and where to put it, in one line."""
    steps = []
    if skb:
        steps.append(f"download {hub_url(processed_file(name))} and unzip it in {skb_dir}/ (it holds processed/)")
    if qa:
        files = ",".join(QA_FILES)
        steps.append(
            f"download {hub_url(f'{QA_FOLDER}/{name}')}/{{{files}}} into {qa_dir}/ keeping those sub-paths "
            "(curl expands the braces)"
        )
    steps.append("or point $GRASP_STARK_ROOT / $GRASP_STARK_QA_ROOT at a copy in stark-qa's or the hub's layout")
    return "; ".join(steps) + f"; then run `grasp data build {name}`"


@contextmanager
def _quiet_hub():
    """huggingface_hub logs a warning per retry of an unreachable host: the one-line error says it instead."""
    logger = logging.getLogger("huggingface_hub")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _download(file: str, manual: str) -> Path:
    """``hf_hub_download`` of one file of the dataset repository, as stark-qa calls it; the cached file's path."""
    from huggingface_hub import constants, hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError

    try:
        with _quiet_hub():
            path = hf_hub_download(REPO, file, repo_type="dataset")
    except (OSError, EntryNotFoundError) as exc:
        if isinstance(exc, LocalEntryNotFoundError):
            reason = (
                f"HF_HUB_OFFLINE is set and {file} is not in the cache {constants.HF_HUB_CACHE}"
                if constants.HF_HUB_OFFLINE
                else f"{constants.ENDPOINT} is unreachable and {file} is not in the cache {constants.HF_HUB_CACHE}"
            )
        else:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            reason = f"{type(exc).__name__}: {first[:200]}" if first else type(exc).__name__
        raise GraspError(f"cannot download STaRK from the Hugging Face hub ({reason}): {manual}") from None
    return Path(str(path))


def _place_file(source: Path, target: Path) -> None:
    """Copy a cached file into place (what stark-qa's download_hf_file does), atomically."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.fetch-{uuid.uuid4().hex[:8]}"
    try:
        shutil.copyfile(source, tmp)
        tmp.replace(target)
    finally:
        tmp.unlink(missing_ok=True)


def _unzip_verified(archive: Path, target: Path) -> None:
    """Check every member's CRC, unzip into a temporary folder beside ``target``, then move each file into place
    (stark-qa unzips the archive into the dataset root: its members start with ``processed/``)."""
    try:
        with zipfile.ZipFile(archive) as zf:
            bad = zf.testzip()
            if bad is not None:
                raise GraspError(f"{archive}: member {bad} fails its CRC check; delete the file and fetch again")
            target.mkdir(parents=True, exist_ok=True)
            tmp = target / f".fetch-{uuid.uuid4().hex[:8]}"
            try:
                zf.extractall(tmp)  # member names with .. or a leading / are made safe by extractall
                for file in sorted(p for p in tmp.rglob("*") if p.is_file()):
                    dest = target / file.relative_to(tmp)
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    file.replace(dest)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    except (zipfile.BadZipFile, EOFError) as exc:
        raise GraspError(f"{archive} is not a readable zip archive ({exc}); delete it and fetch again") from None
