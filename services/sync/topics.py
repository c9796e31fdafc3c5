"""BERTopic topics over the corpus embeddings: fit once, save, load, assign new papers fast.

Fit: BERTopic on the precomputed, L2-normalized embeddings (never an embedding model: nothing is
embedded or downloaded here) — UMAP to 5 dimensions (cosine), HDBSCAN on those, c-TF-IDF top words
with English stop words. Fits are reproducible (fixed `random_state`; UMAP then runs on one thread).

Saved form: BERTopic's own safetensors directory (topic embeddings, topics.json, c-TF-IDF and its
vectorizer config; `BERTopic.load(dir, embedding_model=BaseEmbedder())` opens it) plus a small
`citeweave-topics.json` (format version, embedding model name, checksums of the other files). No
pickle: UMAP and HDBSCAN are not kept. A paper is assigned the topic whose embedding (the mean
embedding of the topic's papers at fit time) is the most cosine-similar to the paper's embedding
— exactly what `BERTopic.transform` does for a safetensors-loaded model. That takes one small
matrix product (~microseconds per paper), does not depend on UMAP/HDBSCAN/numba versions, and
is the same before and after a save/load round-trip (a freshly fitted model assigns through the
same serialized data). `load()`, `assign()` and `topics()` read those files directly with numpy
and safetensors, so the sync service does not import BERTopic (with torch and numba: ~13 s here)
unless it fits.

Time measured here (2 cores shared with an embedding job, load ~5): a first fit on 6,144 demo
papers (mpnet vectors) took 94 s with an empty numba cache (55 s of it importing BERTopic and
compiling numba code into the cache) and 55 s with the cache warm: ~15 s imports, ~5 s exact
nearest neighbours, ~29 s UMAP (about half of it numba code UMAP compiles in every process),
~5 s c-TF-IDF. 2,500 papers: ~41 s warm. Either way it found 59 topics and 23% outliers for
those 6,144 papers, identically on every run.

numba (UMAP, pynndescent) compiles with `cache=True`. Its default cache goes next to the installed
package, or ~/.cache/numba when that is read-only, and importing umap raises "cannot cache
function ... no locator available" when neither is writable (read-only container filesystems).
Unless NUMBA_CACHE_DIR is set, it is pointed at `<CITEWEAVE_CACHE_DIR or ~/.cache/citeweave>/numba`
or, when that cannot be created, at a per-user directory under the system temp directory.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import sys
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
META_FILE = "citeweave-topics.json"
# BERTopic's safetensors layout (bertopic._save_utils); bertopic is pinned in pyproject.toml.
_TOPICS_JSON = "topics.json"
_TOPIC_EMBEDDINGS = "topic_embeddings.safetensors"

RANDOM_STATE = 42
# Below this many papers a topic model means nothing and UMAP's neighbour graph degenerates.
MIN_PAPERS = 100
# HDBSCAN's min_samples: how conservative clustering is. Left at BERTopic's default
# (= min_cluster_size), a min_cluster_size in the 20s-50s on the demo papers makes HDBSCAN's
# "excess of mass" selection keep one parent cluster holding 61% of the corpus; 10 keeps topics
# apart (~60 topics, 23-26% outliers on 6,144 papers with the default min_topic_size).
_MIN_SAMPLES = 10
_UMAP_NEIGHBORS = 15
# Up to this many papers the nearest neighbours UMAP starts from are computed exactly here (one
# blocked matrix product: ~1 s for 2,500 papers, ~7 s for 7,000 on this machine) and handed to
# UMAP. Left to itself UMAP compares all pairs through a Python-level callable below 4,096
# points (~25 s for 2,500 papers) and above that uses pynndescent, whose numba code is compiled
# anew in every process (60-130 s here). Beyond this size the quadratic product costs more than
# that compilation, so pynndescent's approximate search takes over.
EXACT_KNN_MAX = 50_000
_UMAP_COMPONENTS = 5
TOP_WORDS = 10

# Words every abstract uses; with the English stop words they would fill the top words of
# every topic ("propose", "results") instead of what sets a topic apart. Plus LaTeX commands.
_ABSTRACT_STOP_WORDS = frozenset(
    """paper propose proposed proposes approach approaches method methods result results show
    shows using use used based new novel study work also demonstrate demonstrates present
    presents existing introduce introduces achieve achieves performance state-of-the-art
    real-world large-scale end-to-end mathcal mathbf mathrm emph textit textbf frac""".split()
)
# Words of letters and digits with at least one letter, hyphenated compounds kept whole
# ("text-to-image", "retrieval-augmented", "3d", "gpt-4o"); no numbers, no single letters.
_TOKEN_PATTERN = r"(?u)\b(?=[\w-]*[^\W\d_])(?=\w\w|\w-\w)\w+(?:-\w+)*\b"


@dataclass(frozen=True)
class TopicInfo:
    id: int  # -1 = outliers
    top_words: list[str]  # up to 10
    size: int  # papers in the topic at fit time


class TopicModelMissing(Exception):
    """No usable saved topic model in the directory."""


class TopicModelIncompatible(TopicModelMissing):
    """A saved topic model this version cannot use (other format, damaged files): refit."""


class NotEnoughPapers(Exception):
    """Too few papers to fit a topic model."""


def default_min_topic_size(n_papers: int) -> int:
    """HDBSCAN's min_cluster_size when none is given: about 0.4% of the corpus, at least 10.

    BERTopic's fixed default (10) is meant for small collections; on the 6,144 demo abstracts it
    gives ~120 micro-topics (median 30 papers), too fine to be a search filter. Scaling with the
    corpus keeps the number of topics near 40-60: 25 for 6,144 demo papers (~60 topics, median ~55
    papers), 10 for 2,500 (41 topics), 40 for ~10k abstracts.
    """
    return max(10, round(n_papers / 250))


def papers_needed(min_topic_size: int) -> int:
    return max(MIN_PAPERS, 2 * min_topic_size)


def numba_cache_dir() -> Path:
    """Where numba caches compiled code: NUMBA_CACHE_DIR, or a writable directory we pick."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return Path(os.environ["NUMBA_CACHE_DIR"])
    candidates = []
    if os.environ.get("CITEWEAVE_CACHE_DIR"):
        candidates.append(Path(os.environ["CITEWEAVE_CACHE_DIR"]) / "numba")
    else:
        try:
            candidates.append(Path.home() / ".cache" / "citeweave" / "numba")
        except RuntimeError:  # no HOME and no passwd entry
            pass
    uid = os.getuid() if hasattr(os, "getuid") else "user"
    candidates.append(Path(tempfile.gettempdir()) / f"citeweave-numba-{uid}")
    for candidate in candidates:
        try:
            candidate.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        if os.access(candidate, os.W_OK | os.X_OK):
            return candidate
    # Nothing writable: leave numba alone (it may still find a place of its own).
    return candidates[-1]


def _configure_numba_cache() -> None:
    """Points numba at numba_cache_dir() unless NUMBA_CACHE_DIR is set; call before umap loads."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return
    path = numba_cache_dir()
    if os.access(path, os.W_OK):
        os.environ["NUMBA_CACHE_DIR"] = str(path)
        if "numba" in sys.modules:  # imported by someone else first: make it re-read the env
            from numba.core import config

            config.reload_config()


def _unit_rows(vectors: np.ndarray, what: str) -> np.ndarray:
    vectors = np.asarray(vectors)
    if vectors.ndim != 2:
        raise ValueError(f"{what}: expected an n x d matrix, got shape {vectors.shape}")
    vectors = vectors.astype(np.float32, copy=True)
    if not np.isfinite(vectors).all():
        raise ValueError(f"{what}: contain NaN or infinite values")
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    if len(vectors) and norms.min() == 0:
        raise ValueError(f"{what}: contain an all-zero vector")
    # Inputs are meant to be normalized already; normalizing again makes that a non-issue.
    return vectors / norms


def _exact_knn(vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's k nearest rows by cosine distance, itself first at distance exactly 0.

    Rows are unit vectors. UMAP's own k-NN puts each point first at distance 0, and its fuzzy
    simplicial set measures from the first non-zero distance, so self must be exactly 0.
    """
    n = len(vectors)
    indices = np.empty((n, k), dtype=np.int64)
    distances = np.empty((n, k), dtype=np.float32)
    block = max(64, 50_000_000 // n)  # ~200 MB of similarities at a time
    for start in range(0, n, block):
        similarity = vectors[start : start + block] @ vectors.T
        rows = np.arange(len(similarity))
        similarity[rows, start + rows] = np.inf
        nearest = np.argpartition(-similarity, k - 1, axis=1)[:, :k]
        picked = np.take_along_axis(similarity, nearest, axis=1)
        order = np.argsort(-picked, axis=1, kind="stable")
        indices[start : start + block] = np.take_along_axis(nearest, order, axis=1)
        dist = 1.0 - np.take_along_axis(picked, order, axis=1)
        dist[:, 0] = 0.0
        distances[start : start + block] = np.maximum(dist, 0.0)
    return indices, distances


class _Reporting:
    """Wraps BERTopic's UMAP / HDBSCAN steps to report stages; BERTopic only calls these."""

    def __init__(self, inner, before: tuple[str, int], after: tuple[str, int] | None, on_stage):
        self.inner = inner
        self._before = before
        self._after = after
        self._on_stage = on_stage

    def fit(self, X, y=None):
        self._on_stage(*self._before)
        self.inner.fit(X)
        if self._after:
            self._on_stage(*self._after)
        return self

    def fit_transform(self, X, y=None):
        self._on_stage(*self._before)
        out = self.inner.fit_transform(X)
        if self._after:
            self._on_stage(*self._after)
        return out

    def transform(self, X):
        return self.inner.transform(X)

    @property
    def labels_(self):
        return self.inner.labels_

    @property
    def probabilities_(self):
        return self.inner.probabilities_


def _read_dir(directory: Path) -> dict[str, bytes]:
    return {
        path.relative_to(directory).as_posix(): path.read_bytes()
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _previous(directory: Path) -> Path:
    return directory.with_name(f".{directory.name}.previous")


class TopicModel:
    """A fitted topic model: topic embeddings, sizes and top words; see the module docstring."""

    def __init__(self, files: dict[str, bytes], meta: dict):
        self._files = files
        self._meta = meta
        self.model_name: str = meta["embedding_model"]
        self.dimension: int = int(meta["dimension"])
        try:
            from safetensors.numpy import load as load_tensors

            topics = json.loads(files[_TOPICS_JSON])
            embeddings = load_tensors(files[_TOPIC_EMBEDDINGS])["topic_embeddings"]
            outliers = int(topics["_outliers"])
            sizes = {int(k): int(v) for k, v in topics["topic_sizes"].items()}
            words = {
                int(k): [w for w, _ in v if w][:TOP_WORDS]
                for k, v in topics["topic_representations"].items()
            }
        except (KeyError, ValueError, TypeError) as exc:
            raise TopicModelIncompatible(
                f"the saved topic model is damaged or from another BERTopic layout ({exc!r}); "
                "run `citeweave topics fit` again"
            ) from exc
        embeddings = np.asarray(embeddings, dtype=np.float64)
        if embeddings.ndim != 2 or embeddings.shape[1] != self.dimension:
            raise TopicModelIncompatible(
                f"topic embeddings have shape {embeddings.shape}, expected (*, {self.dimension}); "
                "run `citeweave topics fit` again"
            )
        # Row i is topic i - outliers (row 0 is the outliers' mean when there are outliers).
        self._topic_ids = np.arange(len(embeddings)) - outliers
        norms = np.linalg.norm(embeddings, axis=1, keepdims=True)
        self._unit_topics = embeddings / np.where(norms == 0, 1, norms)
        self._infos = sorted(
            (
                TopicInfo(id=t, top_words=words.get(t, []), size=sizes.get(t, 0))
                for t in self._topic_ids.tolist()
            ),
            key=lambda info: (info.id == -1, -info.size, info.id),
        )

    # ----------------------------------------------------------------------------------- fit

    @classmethod
    def fit(
        cls,
        texts: list[str],
        vectors: np.ndarray,
        embedding_model: str,
        min_topic_size: int = 0,
        on_stage: Callable[[str, int], None] = lambda stage, percent: None,
    ) -> tuple[TopicModel, list[int]]:
        """Fit BERTopic on precomputed, L2-normalized embeddings (n x d) and their texts.

        Returns the model and the topic id of every input, in input order (-1 = outlier).
        """
        if len(texts) != len(vectors):
            raise ValueError(f"{len(texts)} texts but {len(vectors)} vectors")
        if min_topic_size < 0:
            raise ValueError(f"min_topic_size must be 0 (automatic) or more, not {min_topic_size}")
        n = len(texts)
        size = min_topic_size or default_min_topic_size(n)
        needed = papers_needed(size)
        if n < needed:
            raise NotEnoughPapers(
                f"fitting topics needs at least {needed} papers"
                + (f" with a minimum topic size of {size}" if needed > MIN_PAPERS else "")
                + f"; there are {n}"
            )
        vectors = _unit_rows(vectors, "vectors")

        on_stage("loading topic modelling libraries", 0)
        _configure_numba_cache()
        import bertopic
        from bertopic import BERTopic
        from bertopic.vectorizers import ClassTfidfTransformer
        from hdbscan import HDBSCAN
        from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS, CountVectorizer
        from umap import UMAP

        knn = (None, None, None)
        if n <= EXACT_KNN_MAX:
            on_stage("finding nearest neighbours", 2)
            knn = (*_exact_knn(vectors, _UMAP_NEIGHBORS), None)
        umap = UMAP(
            n_neighbors=_UMAP_NEIGHBORS,
            precomputed_knn=knn,
            n_components=_UMAP_COMPONENTS,
            min_dist=0.0,
            metric="cosine",
            random_state=RANDOM_STATE,
            n_jobs=1,  # what random_state implies anyway; said here to silence UMAP's warning
        )
        hdbscan = HDBSCAN(
            min_cluster_size=size,
            min_samples=min(_MIN_SAMPLES, size),
            # Guards against the one-giant-cluster selection described at _MIN_SAMPLES.
            max_cluster_size=max(n // 10, 4 * size),
            metric="euclidean",
            cluster_selection_method="eom",
            prediction_data=False,  # new papers are assigned by cosine, not approximate_predict
        )
        vectorizer = CountVectorizer(
            # A list, not a set: BERTopic saves the vectorizer's parameters as JSON.
            stop_words=sorted(ENGLISH_STOP_WORDS | _ABSTRACT_STOP_WORDS),
            token_pattern=_TOKEN_PATTERN,
            lowercase=True,
        )
        model = BERTopic(
            embedding_model=None,  # never embed, never download: embeddings are always given
            # With language="english" (its default) BERTopic deletes every character but
            # [A-Za-z0-9 ] before counting words: "text-to-image" becomes "texttoimage" and
            # "Schrödinger" "Schrdinger". Without a language the vectorizer's pattern decides.
            language=None,
            umap_model=_Reporting(umap, ("reducing dimensions", 5), None, on_stage),
            hdbscan_model=_Reporting(
                hdbscan, ("clustering", 75), ("extracting top words", 85), on_stage
            ),
            vectorizer_model=vectorizer,
            ctfidf_model=ClassTfidfTransformer(reduce_frequent_words=True),
            top_n_words=TOP_WORDS,
            min_topic_size=size,
            calculate_probabilities=False,
            verbose=False,
        )
        with warnings.catch_warnings():
            # Expected: no NNDescent index comes with the precomputed neighbours (UMAP.transform
            # is never used, new papers go by cosine).
            warnings.filterwarnings("ignore", message=r"precomputed_knn\[2\]")
            assigned, _ = model.fit_transform(list(texts), embeddings=vectors)
        assigned = [int(t) for t in assigned]
        if all(t == -1 for t in assigned):
            raise NotEnoughPapers(
                f"no group of at least {size} similar papers was found among {n} papers; "
                "add papers or give a smaller minimum topic size"
            )

        on_stage("serializing", 95)
        # BERTopic's own safetensors save (no embedding model: config.json then names none, so
        # BERTopic.load never tries to build a SentenceTransformer from the hub).
        bertopic_logger = logging.getLogger("BERTopic")
        level = bertopic_logger.level
        bertopic_logger.setLevel(logging.ERROR)  # "saving without an embedding model" is intended
        try:
            with tempfile.TemporaryDirectory(prefix="citeweave-topics-") as tmp:
                model.save(
                    tmp, serialization="safetensors", save_ctfidf=True, save_embedding_model=False
                )
                files = _read_dir(Path(tmp))
        finally:
            bertopic_logger.setLevel(level)
        meta = {
            "format_version": FORMAT_VERSION,
            "embedding_model": embedding_model,
            "dimension": int(vectors.shape[1]),
            "papers": n,
            "min_topic_size": size,
            "random_state": RANDOM_STATE,
            "bertopic_version": bertopic.__version__,
            "fitted_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "files": {name: _sha256(data) for name, data in files.items()},
        }
        topic_model = cls(files, meta)
        on_stage("done", 100)
        return topic_model, assigned

    # ----------------------------------------------------------------------------- persist

    def save(self, directory: Path) -> None:
        """Writes a sibling temporary directory, then renames it over `directory`.

        An interrupted save leaves either the previous model or the new one, never a mix: until
        the final rename the previous model stays in place; between moving it aside and the
        final rename (two renames) it is at `.<name>.previous`, which `load()` falls back to.
        """
        directory = Path(directory)
        directory.parent.mkdir(parents=True, exist_ok=True)
        for stale in directory.parent.glob(f".{directory.name}.tmp-*"):
            shutil.rmtree(stale, ignore_errors=True)  # left by a save that crashed
        tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}.tmp-", dir=directory.parent))
        tmp.chmod(0o755)  # mkdtemp makes it 0700; other readers (the CLI, peers) need to read it
        previous = _previous(directory)
        try:
            entries = dict(self._files)
            entries[META_FILE] = json.dumps(self._meta, indent=2).encode()  # written last
            for name, data in entries.items():
                path = tmp / name
                path.parent.mkdir(parents=True, exist_ok=True)
                with open(path, "wb") as out:
                    out.write(data)
                    out.flush()
                    os.fsync(out.fileno())
            _fsync_dir(tmp)
            moved_aside = False
            if directory.exists():
                if previous.exists():
                    shutil.rmtree(previous)
                os.rename(directory, previous)
                moved_aside = True
            try:
                os.rename(tmp, directory)
            except BaseException:
                if moved_aside and not directory.exists():
                    os.rename(previous, directory)
                raise
            _fsync_dir(directory.parent)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        shutil.rmtree(previous, ignore_errors=True)

    @classmethod
    def load(cls, directory: Path) -> TopicModel:
        directory = Path(directory)
        source = directory
        if not (directory / META_FILE).is_file():
            previous = _previous(directory)
            if not directory.exists() and (previous / META_FILE).is_file():
                log.warning("topic model save was interrupted; loading the previous model")
                source = previous
            else:
                raise TopicModelMissing(
                    f"no topic model in {directory}; run `citeweave topics fit` to create one"
                )
        files = _read_dir(source)
        try:
            meta = json.loads(files.pop(META_FILE))
        except ValueError as exc:
            raise TopicModelIncompatible(
                f"{source / META_FILE} is not valid JSON; run `citeweave topics fit` again"
            ) from exc
        if meta.get("format_version") != FORMAT_VERSION:
            raise TopicModelIncompatible(
                f"the topic model in {source} has format {meta.get('format_version')!r}, this "
                f"version reads {FORMAT_VERSION}; run `citeweave topics fit` again"
            )
        expected = meta.get("files", {})
        damaged = sorted(
            name for name, digest in expected.items()
            if name not in files or _sha256(files[name]) != digest
        )
        if damaged:
            raise TopicModelIncompatible(
                f"the topic model in {source} is damaged ({', '.join(damaged)}); "
                "run `citeweave topics fit` again"
            )
        files = {name: data for name, data in files.items() if name in expected}
        return cls(files, meta)

    # ------------------------------------------------------------------------------ query

    def assign(self, texts: list[str], vectors: np.ndarray) -> list[int]:
        """The topic of each paper: the most cosine-similar topic embedding (BERTopic.transform).

        A paper nearest to the outliers' mean embedding gets -1, as BERTopic would do. `texts`
        are not needed for this and only checked against `vectors`.
        """
        if len(texts) != len(vectors):
            raise ValueError(f"{len(texts)} texts but {len(vectors)} vectors")
        if len(texts) == 0:
            return []
        vectors = _unit_rows(vectors, "vectors")
        if vectors.shape[1] != self.dimension:
            raise ValueError(
                f"vectors have dimension {vectors.shape[1]} but the topic model was fitted on "
                f"{self.dimension}-d embeddings of {self.model_name}"
            )
        similarity = vectors.astype(np.float64) @ self._unit_topics.T
        return self._topic_ids[np.argmax(similarity, axis=1)].tolist()

    def topics(self) -> list[TopicInfo]:
        """Every topic, largest first, outliers (-1) last."""
        return [TopicInfo(i.id, list(i.top_words), i.size) for i in self._infos]

    @property
    def papers(self) -> int:
        """How many papers the model was fitted on."""
        return int(self._meta["papers"])

    @property
    def min_topic_size(self) -> int:
        return int(self._meta["min_topic_size"])
