"""Topic model: fitted on real demo papers (real mpnet embeddings), saved, loaded, assigned."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from services.common.corpus import embedding_text, read_jsonl, row_from_arxiv
from services.sync import topics as topics_module
from services.sync.topics import (
    META_FILE,
    MIN_PAPERS,
    NotEnoughPapers,
    TopicInfo,
    TopicModel,
    TopicModelIncompatible,
    TopicModelMissing,
    default_min_topic_size,
    numba_cache_dir,
)

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "data" / "demo"
MODEL = "all-mpnet-base-v2"
FIT_PAPERS = 2500


def _demo_papers() -> tuple[list[str], list[str], np.ndarray]:
    """Every demo paper that has a prebuilt embedding: ids, texts, unit float32 vectors."""
    with np.load(DEMO / "embeddings-all-mpnet-base-v2.npz") as data:
        ids = [str(i) for i in data["ids"]]
        vectors = data["vectors"].astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    texts = {}
    for record in read_jsonl(DEMO / "sample-10k.jsonl.gz"):
        row = row_from_arxiv(record)
        texts[row.id] = embedding_text(row.title, row.abstract)
    keep = [i for i, paper_id in enumerate(ids) if paper_id in texts]
    return [ids[i] for i in keep], [texts[ids[i]] for i in keep], vectors[keep]


def _subset(n: int, seed: int) -> tuple[list[str], np.ndarray]:
    ids, texts, vectors = DEMO_PAPERS
    # The npz is ordered by text length: sample, do not take a prefix.
    pick = np.sort(np.random.default_rng(seed).choice(len(ids), size=n, replace=False))
    return [texts[i] for i in pick], vectors[pick]


DEMO_PAPERS = _demo_papers()


@pytest.fixture(scope="module")
def fitted():
    texts, vectors = _subset(FIT_PAPERS, seed=0)
    stages: list[tuple[str, int]] = []
    started = time.monotonic()
    model, assigned = TopicModel.fit(
        texts, vectors, MODEL, on_stage=lambda stage, percent: stages.append((stage, percent))
    )
    print(f"fit on {len(texts)} papers: {time.monotonic() - started:.1f} s")
    return texts, vectors, model, assigned, stages


@pytest.fixture(scope="module")
def saved(fitted, tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("topics") / "model"
    fitted[2].save(directory)
    return directory


# ------------------------------------------------------------------------------------ fitting


@pytest.mark.slow
def test_fit_gives_every_paper_a_topic_and_finds_several(fitted):
    texts, _, model, assigned, _ = fitted
    assert len(assigned) == len(texts)
    assert all(isinstance(t, int) for t in assigned)
    real = sorted({t for t in assigned if t != -1})
    assert len(real) >= 10, real
    assert real == list(range(len(real)))  # ids are 0..k-1, -1 for outliers
    outliers = assigned.count(-1) / len(assigned)
    assert outliers < 0.5, outliers
    assert model.model_name == MODEL
    assert model.min_topic_size == default_min_topic_size(FIT_PAPERS)


@pytest.mark.slow
def test_topics_sorted_with_sizes_from_the_fit(fitted):
    _, _, model, assigned, _ = fitted
    infos = model.topics()
    assert all(isinstance(info, TopicInfo) for info in infos)
    assert infos[-1].id == -1
    sizes = [info.size for info in infos[:-1]]
    assert sizes == sorted(sizes, reverse=True)
    assert {info.id: info.size for info in infos} == {t: assigned.count(t) for t in set(assigned)}
    assert all(info.size >= model.min_topic_size for info in infos if info.id != -1)


@pytest.mark.slow
def test_top_words_are_real_words_not_stop_words(fitted):
    _, _, model, _, _ = fitted
    stop = {"the", "and", "of", "to", "in", "we", "a", "is", "for", "with", "this", "that"}
    boilerplate = {"paper", "propose", "method", "results", "approach"}
    for info in model.topics():
        assert 1 <= len(info.top_words) <= 10, info
        assert len(set(info.top_words)) == len(info.top_words)
        for word in info.top_words:
            assert re.fullmatch(r"[^\W_][\w-]*", word), (info.id, word)
            assert re.search(r"[^\W\d_]", word), (info.id, word)  # not a bare number
            assert word not in stop | boilerplate, (info.id, word)
    # Hyphenated terms stay whole: BERTopic's English cleaning would make "texttoimage".
    every_word = {w for info in model.topics() for w in info.top_words}
    assert not {"texttoimage", "retrievalaugmented", "chainofthought"} & every_word


@pytest.mark.slow
def test_stages_are_reported_in_order(fitted):
    stages = fitted[4]
    names = [stage for stage, _ in stages]
    for expected in ("reducing dimensions", "clustering", "extracting top words", "done"):
        assert expected in names
    percents = [percent for _, percent in stages]
    assert percents == sorted(percents) and percents[-1] == 100


@pytest.mark.slow
def test_fit_is_reproducible():
    texts, vectors = _subset(400, seed=1)
    first_model, first = TopicModel.fit(texts, vectors, MODEL)
    second_model, second = TopicModel.fit(texts, vectors, MODEL)
    assert first == second
    assert first_model.topics() == second_model.topics()


# ----------------------------------------------------------------------------------- assigning


@pytest.mark.slow
def test_assign_mostly_reproduces_fitted_topics(fitted):
    texts, vectors, model, assigned, _ = fitted
    again = np.array(model.assign(texts, vectors))
    fitted_topics = np.array(assigned)
    clustered = fitted_topics != -1
    agreement = float((again[clustered] == fitted_topics[clustered]).mean())
    print(f"assign agrees with the fit on {agreement:.3f} of clustered papers")
    assert agreement >= 0.8
    # Papers HDBSCAN left out mostly land in a real topic: the outliers' mean is rarely nearest.
    assert set(again.tolist()) <= set(assigned)


@pytest.mark.slow
def test_assign_new_papers_is_fast(fitted):
    _, _, model, assigned, _ = fitted
    texts, vectors = _subset(128, seed=7)  # may overlap the fitted papers; speed is the point
    model.assign(texts, vectors)
    started = time.perf_counter()
    result = model.assign(texts, vectors)
    elapsed = time.perf_counter() - started
    assert len(result) == 128 and set(result) <= set(assigned)
    assert elapsed < 0.5, elapsed
    assert model.assign([], np.zeros((0, 768), np.float32)) == []


@pytest.mark.slow
def test_assign_rejects_vectors_of_another_model(fitted):
    _, _, model, _, _ = fitted
    with pytest.raises(ValueError, match="384"):
        model.assign(["a paper"], np.ones((1, 384), np.float32))
    with pytest.raises(ValueError, match="texts"):
        model.assign(["a", "b"], np.ones((1, 768), np.float32))


# ------------------------------------------------------------------------------ save and load


@pytest.mark.slow
def test_save_load_round_trip_is_identical(fitted, saved):
    texts, vectors, model, _, _ = fitted
    loaded = TopicModel.load(saved)
    assert loaded.model_name == MODEL
    assert loaded.topics() == model.topics()
    assert loaded.assign(texts, vectors) == model.assign(texts, vectors)
    new_texts, new_vectors = _subset(300, seed=11)
    assert loaded.assign(new_texts, new_vectors) == model.assign(new_texts, new_vectors)
    meta = json.loads((saved / META_FILE).read_text())
    assert meta["format_version"] == topics_module.FORMAT_VERSION
    assert meta["embedding_model"] == MODEL
    # BERTopic's safetensors form, no pickle anywhere, and no embedding model to fetch.
    names = {p.name for p in saved.iterdir()}
    assert {"topic_embeddings.safetensors", "topics.json", "config.json"} <= names
    assert not [n for n in names if n.endswith((".pkl", ".pickle", ".bin", ".joblib"))]
    assert "embedding_model" not in json.loads((saved / "config.json").read_text())


@pytest.mark.slow
def test_loading_never_reaches_for_the_hub(fitted, saved, monkeypatch):
    """load() and BERTopic.load of our directory work offline and build no SentenceTransformer."""
    import huggingface_hub
    import sentence_transformers

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    calls: list[str] = []

    def refuse(*args, **kwargs):
        calls.append(repr(args))
        raise AssertionError("a model download was attempted")

    for name in ("hf_hub_download", "snapshot_download"):
        monkeypatch.setattr(huggingface_hub, name, refuse)
        monkeypatch.setattr(huggingface_hub.file_download, name, refuse, raising=False)
    monkeypatch.setattr(sentence_transformers.SentenceTransformer, "__init__", refuse)

    texts, vectors, model, _, _ = fitted
    loaded = TopicModel.load(saved)
    ours = loaded.assign(texts, vectors)

    # Our reading of the directory is BERTopic's: BERTopic.load + transform agree with assign.
    from bertopic import BERTopic
    from bertopic.backend import BaseEmbedder

    theirs, _ = BERTopic.load(str(saved), embedding_model=BaseEmbedder()).transform(
        texts, embeddings=vectors
    )
    assert calls == []
    agreement = float(np.mean(np.array(theirs) == np.array(ours)))
    assert agreement >= 0.999, agreement  # float32 vs float64 could only split exact ties


def test_load_of_an_empty_or_absent_directory_says_to_fit(tmp_path):
    for directory in (tmp_path, tmp_path / "absent"):
        with pytest.raises(TopicModelMissing, match="citeweave topics fit"):
            TopicModel.load(directory)


@pytest.mark.slow
def test_interrupted_save_keeps_the_previous_model(fitted, tmp_path, monkeypatch):
    _, vectors, model, _, _ = fitted
    directory = tmp_path / "topics"
    model.save(directory)
    # A different model to save over it (same topics, another embedding model name).
    newer = TopicModel(model._files, {**model._meta, "embedding_model": "newer-model"})

    real_rename = os.rename

    def failing_rename(src, dst):
        if Path(src).name.startswith(".topics.tmp-"):
            raise OSError("simulated crash at the final rename")
        return real_rename(src, dst)

    monkeypatch.setattr(topics_module.os, "rename", failing_rename)
    with pytest.raises(OSError, match="simulated"):
        newer.save(directory)
    monkeypatch.setattr(topics_module.os, "rename", real_rename)

    loaded = TopicModel.load(directory)
    assert loaded.model_name == MODEL
    assert loaded.topics() == model.topics()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["topics"]  # no temp dir left behind

    # A crash between moving the old model aside and renaming the new one in: load falls back.
    os.rename(directory, tmp_path / ".topics.previous")
    assert TopicModel.load(directory).topics() == model.topics()
    newer.save(directory)
    assert TopicModel.load(directory).model_name == "newer-model"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["topics"]


@pytest.mark.slow
def test_damaged_or_foreign_saves_are_refused(fitted, tmp_path):
    model = fitted[2]
    directory = tmp_path / "topics"
    model.save(directory)
    (directory / "topics.json").write_text("{}")
    with pytest.raises(TopicModelIncompatible, match="damaged.*topics.json"):
        TopicModel.load(directory)

    model.save(directory)
    meta = json.loads((directory / META_FILE).read_text())
    (directory / META_FILE).write_text(json.dumps({**meta, "format_version": 999}))
    with pytest.raises(TopicModelMissing, match="citeweave topics fit"):
        TopicModel.load(directory)


# --------------------------------------------------------------------------- too few papers


def test_too_few_papers_is_refused_before_fitting():
    texts, vectors = _subset(20, seed=3)
    with pytest.raises(NotEnoughPapers) as refused:
        TopicModel.fit(texts, vectors, MODEL)
    assert f"at least {MIN_PAPERS} papers" in str(refused.value)
    assert "there are 20" in str(refused.value)

    texts, vectors = _subset(150, seed=3)
    with pytest.raises(NotEnoughPapers, match="at least 200 papers.*minimum topic size of 100"):
        TopicModel.fit(texts, vectors, MODEL, min_topic_size=100)


def test_mismatched_inputs_are_refused():
    texts, vectors = _subset(120, seed=4)
    with pytest.raises(ValueError, match="120 texts but 119 vectors"):
        TopicModel.fit(texts, vectors[:-1], MODEL)
    bad = vectors.copy()
    bad[5, 3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        TopicModel.fit(texts, bad, MODEL)


def test_default_min_topic_size_scales_with_the_corpus():
    assert default_min_topic_size(500) == 10
    assert default_min_topic_size(6144) == 25
    assert default_min_topic_size(10_000) == 40


# ----------------------------------------------------------------------------------- numba


def test_numba_cache_goes_to_a_writable_directory(tmp_path, monkeypatch):
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.delenv("CITEWEAVE_CACHE_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert numba_cache_dir() == tmp_path / "home" / ".cache" / "citeweave" / "numba"
    assert numba_cache_dir().is_dir()

    monkeypatch.setenv("CITEWEAVE_CACHE_DIR", str(tmp_path / "cache"))
    assert numba_cache_dir() == tmp_path / "cache" / "numba"

    # A home that cannot hold directories (here: it is a file) falls back to the temp directory.
    monkeypatch.delenv("CITEWEAVE_CACHE_DIR")
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("HOME", str(tmp_path / "file"))
    fallback = numba_cache_dir()
    assert fallback.is_dir() and fallback.parent == Path(tempfile.gettempdir())

    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "given"))
    assert numba_cache_dir() == tmp_path / "given"


_JIT_PROBE = """
import os, sys
{first}
from services.sync.topics import _configure_numba_cache
_configure_numba_cache()
sys.path.insert(0, sys.argv[1])
import jitprobe
assert jitprobe.twice(21) == 42
from numba.core import config
print(config.CACHE_DIR)
"""


@pytest.mark.parametrize("numba_first", [False, True], ids=["numba-after", "numba-imported-first"])
def test_numba_caches_compiled_code_under_home_without_numba_cache_dir(tmp_path, numba_first):
    """With NUMBA_CACHE_DIR unset, a cache=True function compiles and caches under $HOME."""
    probe = tmp_path / "probe"
    probe.mkdir()
    (probe / "jitprobe.py").write_text(
        "import numba\n\n@numba.njit(cache=True)\ndef twice(x):\n    return 2 * x\n"
    )
    home = tmp_path / "home"
    unset = ("NUMBA_CACHE_DIR", "CITEWEAVE_CACHE_DIR")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env["HOME"] = str(home)
    script = _JIT_PROBE.format(first="import numba" if numba_first else "")
    done = subprocess.run(
        [sys.executable, "-c", script, str(probe)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    cache = home / ".cache" / "citeweave" / "numba"
    assert done.stdout.strip() == str(cache)
    assert any(p.suffix == ".nbi" for p in cache.rglob("*")), list(cache.rglob("*"))
