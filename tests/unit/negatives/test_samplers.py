import numpy as np
import pytest

from medvqa_build.negatives import SAMPLERS, NotEnoughOptions, OptionRequest
from medvqa_build.negatives.visual_class import VisualClassSampler
from medvqa_build.negatives.visual_neighbor import VisualNeighborSampler
from medvqa_build.ontology import Ontology

CLASSES = ["polyp", "adenomatous polyp", "ulcer", "erosion", "bleeding", "normal", "esophagitis"]
ONTO = Ontology.from_mapping({"parents": {"adenomatous polyp": "polyp"}})


@pytest.fixture(scope="module")
def data(synth):
    return synth.clustered_embeddings(CLASSES, per_class=12, twins=[("ulcer", "erosion")])


def fitted(name, data, **params):
    samples, emb, labels = data
    return SAMPLERS.get(name)(**params).fit(samples, emb, labels)


def request_for(sample, truth, n=4, **kw):
    kw.setdefault("ontology", ONTO)
    return OptionRequest(truth=truth, pool=tuple(CLASSES), n_options=n, sample=sample, **kw)


@pytest.mark.parametrize("name", ["label_pool", "visual_class", "visual_neighbor"])
def test_constraints_and_determinism(name, data):
    sampler = fitted(name, data)
    samples, _, labels = data
    for sample, truth in list(zip(samples, labels, strict=True))[::5]:
        req = request_for(sample, truth, n=4, mandatory=("normal",))
        neg = sampler.sample(req, np.random.default_rng(7))
        assert neg.strategy == name
        assert len(neg.candidates) == 3
        assert len(set(neg.candidates)) == len(neg.candidates)
        assert truth not in neg.candidates
        if truth != "normal":
            assert neg.candidates[0] == "normal"
        if truth in ("polyp", "adenomatous polyp"):
            assert not {"polyp", "adenomatous polyp"} & set(neg.candidates)
        if name != "label_pool":
            assert len(neg.scores) == len(neg.candidates)
        again = sampler.sample(req, np.random.default_rng(7))
        assert again.candidates == neg.candidates
        assert np.array_equal(again.scores, neg.scores, equal_nan=True)


@pytest.mark.parametrize("name", ["label_pool", "visual_class", "visual_neighbor"])
def test_not_enough_options_never_short(name, data):
    sampler = fitted(name, data)
    samples, _, labels = data
    req = request_for(samples[0], labels[0], n=len(CLASSES) + 1)
    with pytest.raises(NotEnoughOptions):
        sampler.sample(req, np.random.default_rng(0))


@pytest.mark.parametrize("name", ["visual_class", "visual_neighbor"])
def test_hard_negative_is_the_look_alike(name, data):
    sampler = fitted(name, data)
    samples, _, labels = data
    for sample, truth in zip(samples, labels, strict=True):
        if truth == "ulcer":
            neg = sampler.sample(request_for(sample, truth, n=2), np.random.default_rng(0))
            assert neg.candidates == ("erosion",)
            assert neg.pool_size >= 4


@pytest.mark.parametrize("aggregate", ["max", "mean", "topk"])
def test_visual_class_scores_sorted_and_self_excluded(aggregate, data):
    samples, emb, labels = data
    sampler = VisualClassSampler(aggregate=aggregate, topk=3).fit(samples, emb, labels)
    req = request_for(samples[0], labels[0], n=5)
    neg = sampler.sample(req, np.random.default_rng(0))
    assert list(neg.scores) == sorted(neg.scores, reverse=True)
    # A library holding only the query itself: the query's own class gets no score.
    solo = VisualClassSampler().fit([samples[0]], emb[:1], labels[:1])
    assert solo.class_scores(OptionRequest(labels[0], (), 2, sample=samples[0])) == {}


def test_visual_class_library_size_and_healthy_truth(data):
    samples, emb, labels = data
    sampler = VisualClassSampler(library_size=3, seed=1).fit(samples, emb, labels)
    assert all(b - a == 3 for a, b in sampler._bounds)
    normal = next(s for s, lab in zip(samples, labels, strict=True) if lab == "normal")
    req = request_for(normal, "normal", n=5, mandatory=("normal",))
    neg = sampler.sample(req, np.random.default_rng(0))
    assert len(neg.candidates) == 4 and "normal" not in neg.candidates


def test_pool_and_same_source_restrict(data, synth):
    samples, emb, labels = data
    other = [
        synth.make_sample(s.sample_id, source="other" if lab == "bleeding" else "src")
        for s, lab in zip(samples, labels, strict=True)
    ]
    for cls in (VisualClassSampler, VisualNeighborSampler):
        s = cls(same_source=True).fit(other, emb, labels)
        req = request_for(other[0], labels[0], n=5)
        assert "bleeding" not in s.sample(req, np.random.default_rng(0)).candidates
        pooled = OptionRequest(labels[0], ("ulcer", "normal", "bleeding"), 3, sample=samples[0])
        s = cls().fit(samples, emb, labels)
        got = set(s.sample(pooled, np.random.default_rng(0)).candidates)
        assert got <= {"ulcer", "normal", "bleeding"}


def test_request_embedding_for_unfitted_query(data, synth):
    samples, emb, labels = data
    sampler = VisualClassSampler().fit(samples, emb, labels)
    outsider = synth.make_sample("new:0")
    with pytest.raises(ValueError, match="no embedding"):
        sampler.sample(OptionRequest("ulcer", (), 3, sample=outsider), np.random.default_rng(0))
    req = OptionRequest("ulcer", (), 2, sample=outsider, embedding=emb[labels.index("ulcer")])
    assert sampler.sample(req, np.random.default_rng(0)).candidates == ("erosion",)


def test_visual_neighbor_widens_search_and_skips_group(data):
    samples, emb, labels = data
    sampler = VisualNeighborSampler(k=2).fit(samples, emb, labels)
    req = request_for(samples[0], labels[0], n=6)
    neg = sampler.sample(req, np.random.default_rng(0))
    assert len(neg.candidates) == 5
    scores = sampler.class_scores(req, 1)
    assert labels[0] in scores  # same-label neighbours outside the query's group are seen


class _CountingRows:
    """An embedding matrix read row by row, counting the rows read (as generate's on-demand
    rows from the embed stage's file)."""

    def __init__(self, emb):
        self.emb, self.read = emb, 0

    def __len__(self):
        return len(self.emb)

    def __getitem__(self, rows):
        out = self.emb[rows]
        self.read += 1 if np.ndim(rows) == 0 else len(out)
        return out


def test_visual_class_reads_only_library_and_query_rows(synth):
    samples, emb, labels = synth.clustered_embeddings(CLASSES[:3], per_class=200)
    rows = _CountingRows(emb)
    lazy = VisualClassSampler(library_size=10, seed=4).fit(samples, rows, labels)
    assert rows.read == 30  # 3 classes x 10 library images: the 600 pool vectors stay unread
    eager = VisualClassSampler(library_size=10, seed=4).fit(samples, emb, labels)
    for i in (0, 250, 599):
        req = request_for(samples[i], labels[i], n=3)
        assert lazy.class_scores(req) == eager.class_scores(req)
    assert rows.read == 33  # one row per query


@pytest.mark.parametrize("kind", ["flat", "ivf"])
@pytest.mark.parametrize("same_source", [False, True])
def test_visual_neighbor_on_disk_scores_as_in_memory(kind, same_source, synth, tmp_path):
    # spread out: each probed cell holds several labels, so most requests find their options
    samples, emb, labels = synth.clustered_embeddings(CLASSES, per_class=180, spread=2.0)
    samples = [
        synth.make_sample(s.sample_id, source="a" if i % 3 else "b", group=f"g{i // 5}")
        for i, s in enumerate(samples)
    ]
    labels = [None if i % 11 == 0 else lab for i, lab in enumerate(labels)]  # unlabelled rows
    params = dict(k=6, same_source=same_source, index={"kind": kind, "threads": 2})
    mem = VisualNeighborSampler(**params).fit(samples, emb, labels)
    rows = _CountingRows(emb)
    disk = VisualNeighborSampler(memory_mib=0, spill_dir=tmp_path, **params).fit(
        samples, rows, labels
    )
    assert not mem.spilled and disk.spilled and disk._index.kind == kind
    assert rows.read == 1 + sum(1 for lab in labels if lab)  # the width, then each row once
    assert list(tmp_path.iterdir()) == []  # the spill files have no names
    checked = ok = 0
    for i in range(0, len(samples), 7):
        if labels[i] is None:
            continue
        req = request_for(samples[i], labels[i], n=5, mandatory=("normal",) if i % 2 else ())
        got = _outcome(mem, req)
        assert got == _outcome(disk, req)
        ok += not isinstance(got, str)
        assert mem.class_scores(req, 6) == disk.class_scores(req, 6)  # widened past the lists
        checked += 1
    assert checked > 100 and ok > checked // 2


def _outcome(sampler, req):
    try:
        neg = sampler.sample(req, np.random.default_rng(0))
    except NotEnoughOptions as exc:  # a tight cluster's probed cells may hold too few labels
        return str(exc)
    return neg.candidates, neg.scores, neg.pool_size


@pytest.mark.parametrize("name", ["label_pool", "visual_class", "visual_neighbor"])
def test_no_option_text_inside_another(name, data):
    """The samplers never return a distractor whose text contains (or lies inside) the truth,
    a mandatory option or another distractor ("cut" / "cutting between ...")."""
    from medvqa_build.vocab import nested_options

    samples, emb, labels = data
    nested = ["cut", "cutting between the prostate and the urethra", "cutting the bladder neck"]
    names = [nested[k % 3] if lab in ("ulcer", "erosion") else lab for k, lab in enumerate(labels)]
    sampler = SAMPLERS.get(name)().fit(samples, emb, names)
    pool = tuple(dict.fromkeys(names))
    for k, (sample, truth) in enumerate(zip(samples, names, strict=True)):
        req = OptionRequest(truth=truth, pool=pool, n_options=4, sample=sample, ontology=ONTO)
        neg = sampler.sample(req, np.random.default_rng(k))
        assert nested_options([truth, *neg.candidates]) == [], (truth, neg.candidates)


def test_whole_label_set_may_nest():
    """When every allowed label is an option (EndoBench's six ulcerative-colitis grades), the
    set is the recipe's own and is kept, nested texts and all; with a choice it is avoided."""
    grades = [f"ulcerative colitis grade {g}" for g in ("0-1", "1", "1-2", "2", "2-3", "3")]
    sampler = SAMPLERS.get("label_pool")()
    whole = OptionRequest(truth=grades[1], pool=tuple(grades), n_options=6)
    neg = sampler.sample(whole, np.random.default_rng(0))
    assert sorted(neg.candidates) == sorted(g for g in grades if g != grades[1])
    assert neg.pool_size == len(neg.candidates)  # the options-apart rule exempts it
    some = OptionRequest(truth=grades[1], pool=tuple(grades), n_options=3)
    for seed in range(10):
        picked = sampler.sample(some, np.random.default_rng(seed)).candidates
        assert "ulcerative colitis grade 1-2" not in picked
