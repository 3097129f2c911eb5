"""Config loading: YAML <-> dataclasses, dotted overrides, clear errors naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from lira.config import ConfigError, from_dict, save_config, to_dict
from lira.translation.config import TranslationConfig, TranslatorConfig
from pipeline.runconfig import RunConfig, load_config

ROOT = Path(__file__).resolve().parents[1]


def _llm(name: str) -> dict:
    return {"name": name, "kind": "transformers", "role": "llm", "model": "demo:qwen3-lm"}


def _mt(name: str) -> dict:
    return {"name": name, "kind": "transformers", "role": "mt", "model": "demo:marian"}


def test_defaults_are_paper_values():
    cfg = RunConfig()
    assert (cfg.arca.alpha, cfg.arca.beta, cfg.arca.gamma, cfg.arca.delta) == (0.4, 0.3, 0.3, 1.0)
    assert (cfg.arca.actor_lr, cfg.arca.encoder_lr, cfg.arca.adaptor_lr) == (1e-4, 5e-5, 1e-4)
    assert cfg.arca.max_grad_norm == 1.0
    assert (cfg.lasr.tau, cfg.lasr.tau_k, cfg.lasr.safe_delta) == (0.1, 0.5, 0.2)
    assert (cfg.lasr.safe_beta, cfg.lasr.hinge_gamma, cfg.lasr.mv_nu) == (0.03, 0.05, 0.15)
    assert cfg.baselines.recipes["clear"].lambdas == [0.4, 0.4, 0.2]


@pytest.mark.parametrize("path", sorted((ROOT / "configs").glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_configs_load_and_round_trip(path):
    cfg = load_config(path)
    again = from_dict(RunConfig, to_dict(cfg))
    assert again == cfg


def test_dotted_overrides_parse_yaml_values(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text(yaml.safe_dump({"arca": {"steps": 10}}))
    cfg = load_config(f, ["arca.steps=50", "arca.lora=true", "data.train_languages=[de, ru]"])
    assert cfg.arca.steps == 50 and cfg.arca.lora is True
    assert cfg.data.train_languages == ["de", "ru"]


def test_int_is_accepted_for_float_but_not_bool_for_int():
    assert load_config(None, ["arca.eta=2"]).arca.eta == 2.0
    assert load_config(None, ["arca.encoder_lr=5e-5"]).arca.encoder_lr == 5e-5  # YAML 1.1 str
    with pytest.raises(ConfigError, match=r"arca\.steps.*integer"):
        load_config(None, ["arca.steps=true"])


@pytest.mark.parametrize(
    ("override", "pattern"),
    [
        ("arca.pol_size=3", r"'arca.pol_size'.*unknown key.*pool_size"),
        ("arcaa.steps=3", r"'arcaa'.*unknown key"),
        ("arca.steps=abc", r"'arca.steps'.*expected an integer"),
        ("arca.pool_size=0", r"'arca.pool_size'.*>= 1"),
        ("lasr.lr=-0.1", r"'lasr.lr'.*> 0"),
        ("arca.encoder_lr=-1e-5", r"'arca.encoder_lr'.*> 0"),
        ("arca.reward_baseline=median", r"'arca.reward_baseline'.*one of"),
        ("translation.pass_at_k=2", r"'translation.pass_at_k'.*pass@2 needs 2 LLM translators"),
        ("eval.scenarios=[en-en, xx]", r"'eval.scenarios'.*unknown"),
        ("baselines.methods=[clear, foo]", r"'baselines.methods'.*unknown"),
        ("lasr.use_llm_critic=false", r"'lasr.use_llm_critic'.*moved to arca.use_llm_critic"),
    ],
)
def test_bad_values_name_the_key_and_the_fix(override, pattern):
    with pytest.raises(ConfigError, match=pattern):
        load_config(None, [override])


def test_error_inside_a_list_names_the_index():
    data = {"translation": {"llm_translators": [_llm("a"), {"name": "b", "kind": "openai"}]}}
    with pytest.raises(ConfigError, match=r"llm_translators\[1\]\.base_url"):
        from_dict(RunConfig, data)


def test_pass_at_k_selects_k_llms_then_mt_models():
    cfg = from_dict(
        TranslationConfig,
        {
            "llm_translators": [_llm("l1"), _llm("l2")],
            "mt_translators": [_mt("m1"), _mt("m2"), _mt("m3")],
            "num_candidates": 4,
        },
    )
    picks = {}
    for k in (0, 1, 2):
        cfg.pass_at_k = k
        picks[k] = [t.name for t in cfg.active_translators()]
    assert picks == {
        0: ["m1", "m2", "m3"],
        1: ["l1", "m1", "m2", "m3"],
        2: ["l1", "l2", "m1", "m2"],
    }


def test_duplicate_translator_names_and_wrong_roles_are_rejected():
    with pytest.raises(ConfigError, match="unique"):
        from_dict(TranslationConfig, {"llm_translators": [_llm("a"), _llm("a")]})
    with pytest.raises(ConfigError, match="role"):
        from_dict(TranslationConfig, {"mt_translators": [_llm("a")]})
    with pytest.raises(ConfigError, match="name"):
        TranslatorConfig(name="")


def test_file_errors(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("- a list\n- not a mapping\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_config(bad)
    with pytest.raises(ConfigError, match=r"key\.sub=value"):
        load_config(None, ["arca.steps"])


def test_save_and_reload(tmp_path):
    cfg = load_config(None, ["arca.steps=7", "data.eval_languages=[ru]"])
    save_config(cfg, tmp_path / "c.yaml")
    assert load_config(tmp_path / "c.yaml") == cfg


@pytest.mark.parametrize(
    ("override", "pattern"),
    [
        ("lasr.fusion_heads=0", r"'lasr.fusion_heads'.*>= 1"),
        ("lasr.fusion_dim=250", r"'lasr.fusion_dim'.*multiple of fusion_heads \(4\)"),
        ("lasr.save_every=0", r"'lasr.save_every'.*>= 1"),
        ("arca.save_every=0", r"'arca.save_every'.*>= 1"),
        ("lasr.log_every=0", r"'lasr.log_every'.*>= 1"),
        ("lasr.grad_accum=0", r"'lasr.grad_accum'.*>= 1"),
        ("eval.chunk_size=0", r"'eval.chunk_size'.*>= 1"),
        ("eval.metrics=[bogus]", r"'eval.metrics'.*unknown \['bogus'\].*ndcg@10"),
        ("eval.metrics=[]", r"'eval.metrics'.*at least one"),
        ("translation.pass_at_k=3", r"'translation.pass_at_k'.*pass@3 needs 3 LLM translators"),
        ("translation.num_candidates=0", r"'translation.num_candidates'.*>= 1"),
        ("output_dir=''", r"'output_dir'.*must name a folder"),
        ("output_dir='  '", r"'output_dir'.*must name a folder"),
        ("arca.pool_size=100000", r"'arca.pool_size'.*<= 4096"),
        # sizes that passed, then ended in an allocator traceback (issue 60, item 5)
        ("lasr.fusion_dim=100000000000", r"'lasr.fusion_dim'.*<= 8192"),
        ("lasr.fusion_layers=100000000", r"'lasr.fusion_layers'.*<= 64"),
        ("arca.adaptor_hidden=100000000000", r"'arca.adaptor_hidden'.*\[1, 65536\]"),
        ("lasr.lr=.inf", r"'lasr.lr'.*finite number"),
        ("lasr.max_grad_norm=.nan", r"'lasr.max_grad_norm'.*finite number"),
        ("arca.eta=1e999", r"'arca.eta'.*finite number"),
        ("arca.eta=" + "9" * 400, r"'arca.eta'.*too large"),
        ("translation.critic.max_concurrency=0", r"'translation.critic.max_concurrency'.*>= 1"),
        ("baselines.lora_r=0", r"'baselines.lora_r'.*>= 1"),
        ("arca.steps=[", r"'arca.steps'.*not valid YAML.*quote it"),
        # learning rates and seeds have ranges (issue 33: 1e30 trained into NaN, seed -1 crashed)
        ("arca.adaptor_lr=1e30", r"'arca.adaptor_lr'.*above 10"),
        ("lasr.lr=1e30", r"'lasr.lr'.*above 10"),
        ("lasr.gate_lr=0", r"'lasr.gate_lr'.*> 0"),
        ("lasr.adaptor_lr=-1", r"'lasr.adaptor_lr'.*> 0"),
        ("baselines.lr=-1e-5", r"'baselines.lr'.*>= 0"),
        ("baselines.lr=11", r"'baselines.lr'.*above 10"),
        ("baselines.clear.lr=1e9", r"'baselines.clear.lr'.*above 10"),
        ("baselines.merging.negative_ranks=[9, 3]", r"'baselines.merging.negative_ranks'.*first"),
        ("tune_translator.lr=100", r"'tune_translator.lr'.*above 10"),
        ("arca.seed=-1", r"'arca.seed'.*\[0, 2\*\*32 - 1\], got -1"),
        ("lasr.seed=-1", r"'lasr.seed'.*got -1"),
        ("seed=-1", r"'seed'.*got -1"),
        ("data.split_seed=4294967296", r"'data.split_seed'.*got 4294967296"),
        ("eval.seed=-3", r"'eval.seed'.*got -3"),
        ("baselines.seed=-1", r"'baselines.seed'.*got -1"),
        # output names stay inside output_dir
        ("tune_translator.name=../../x", r"'tune_translator.name'.*no path separators"),
        ("tune_translator.name=a/b", r"'tune_translator.name'.*no path separators"),
        ("tune_translator.name=..", r"'tune_translator.name'.*no '\.\.'"),
    ],
)
def test_impossible_values_fail_at_load_naming_key_and_fix(override, pattern):
    with pytest.raises(ConfigError, match=pattern):
        load_config(None, [override])


def test_g_translation_block_and_a_training_g_fail_at_load_naming_both_keys():
    """g's view of each translation is computed once, before LaSR: it cannot follow a g that
    LaSR trains."""
    assert load_config(None, ["lasr.translated_g=true"]).lasr.translated_g
    with pytest.raises(ConfigError, match=r"'lasr.translated_g'.*lasr.train_encoder"):
        load_config(None, ["lasr.translated_g=true", "lasr.train_encoder=true"])


def test_translator_concurrency_is_checked():
    with pytest.raises(ConfigError, match=r"llm_translators\[0\]\.max_concurrency"):
        from_dict(RunConfig, {"translation": {"llm_translators": [{**_llm("a"),
                                                                   "max_concurrency": 0}]}})  # fmt: skip


def test_non_utf8_yaml_is_a_config_error(tmp_path):
    f = tmp_path / "latin1.yaml"
    f.write_bytes("arca:\n  steps: 3\n# Größe\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=r"latin1.yaml is not UTF-8 text.*save it as UTF-8"):
        load_config(f)


@pytest.mark.parametrize(
    "text, pattern",
    [
        ("arca:\n  steps: 3\n  steps: 5\n", r"'arca.steps'.*twice \(lines 2 and 3\).*keep one"),
        ("seed: 1\narca: {steps: 3}\nseed: 2\n", r"'seed'.*twice \(lines 1 and 3\)"),
        ("", r"c.yaml is empty.*write \{\} in it to run every default"),
        ("# only a comment\n", r"c.yaml is empty"),
    ],
    ids=["nested", "top-level", "empty", "only-comments"],
)
def test_a_duplicate_key_or_an_empty_file_is_one_line(tmp_path, text, pattern):
    """Issue 60, item 5: YAML's last duplicate key won silently, and an empty file ran as the
    full default config."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=pattern) as e:
        load_config(cfg)
    assert "\n" not in str(e.value)
    with pytest.raises(ConfigError, match=r"'arca.x'.*twice"):
        load_config(None, ["arca={x: 1, x: 2}"])


def test_merge_keys_and_an_explicit_empty_mapping_are_not_refused(tmp_path):
    from lira.config_yaml import load_yaml

    text = "base: &b {steps: 3, seed: 1}\narca:\n  <<: *b\n  steps: 5\n"
    assert load_yaml(text, "c.yaml")["arca"] == {"steps": 5, "seed": 1}
    cfg = tmp_path / "c.yaml"
    cfg.write_text("{}\n", encoding="utf-8")
    assert load_config(cfg) == load_config(None)


def test_config_error_is_a_user_error():
    from lira.errors import LiRAError

    assert issubclass(ConfigError, LiRAError) and ConfigError("k", "m").exit_code == 2


def test_eval_metric_names_match_the_evaluator():
    from evaluators.config import EVAL_METRICS
    from lira.metrics import MEASURES

    assert set(EVAL_METRICS) == set(MEASURES)


@pytest.mark.parametrize(
    "store", ["../translations.sqlite", "../../etc/passwd", "a/../../x.sqlite", "sub/..", ".", ""]
)
def test_relative_store_paths_may_not_leave_output_dir(store):
    """translation.store is read relative to output_dir: '..' out of it (or the folder itself)
    is refused at load, naming the key and the fix."""
    with pytest.raises(ConfigError, match=r"translation\.store.*(output_dir|empty)") as e:
        load_config(None, [f"translation.store={store!r}"])
    assert "\n" not in str(e.value)


def test_store_paths_inside_output_dir_or_absolute_are_accepted(tmp_path, caplog):
    import logging

    from lira.translation.engine import store_path

    out = tmp_path / "run"
    for store in ("t.sqlite", "./sub/t.sqlite", "a/../t.sqlite"):
        cfg = load_config(None, [f"output_dir={out}", f"translation.store={store}"])
        assert store_path(cfg).resolve().is_relative_to(out.resolve()), store
    elsewhere = tmp_path / "shared" / "t.sqlite"  # absolute: explicit, used as is, and logged
    cfg = load_config(None, [f"output_dir={out}", f"translation.store={elsewhere}"])
    with caplog.at_level(logging.INFO, logger="lira.translation.engine"):
        assert store_path(cfg) == elsewhere
        assert store_path(cfg) == elsewhere
    logged = [r.getMessage() for r in caplog.records if str(elsewhere) in r.getMessage()]
    assert len(logged) == 1 and "absolute" in logged[0]


def test_cli_refuses_a_store_outside_output_dir_in_one_line(tmp_path, capsys):
    from pipeline.cli import main

    code = main(["translate", str(ROOT / "configs" / "demo.yaml"), "--output-dir",
                 str(tmp_path / "o"), "translation.store=../../outside.sqlite"])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("lira: config key 'translation.store'"), err
    assert "\n" not in err and "absolute path" in err
    assert not (tmp_path / "outside.sqlite").exists() and not (tmp_path / "o").exists()


def test_learning_rates_and_seeds_at_their_bounds_are_accepted():
    cfg = load_config(None, ["lasr.lr=10", "arca.adaptor_lr=1e-9", "arca.seed=0",
                             "lasr.seed=4294967295", "baselines.lr=0",
                             "tune_translator.name=smollm2-grpo.v2"])  # fmt: skip
    assert cfg.lasr.lr == 10 and cfg.lasr.seed == 2**32 - 1 and cfg.baselines.lr == 0
    assert cfg.tune_translator.name == "smollm2-grpo.v2"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("baselines.clear_lr", "baselines.clear.lr"),
        ("baselines.merging_negative_ranks", "baselines.merging.negative_ranks"),
        ("baselines.lancer_lambda", "baselines.lancer.weight"),
        ("baselines.jsd_eps", "baselines.jsd.eps"),
    ],
)
def test_a_flat_baseline_recipe_key_names_its_new_section_key(old, new):
    """The flat recipe keys of earlier versions (``baselines.clear_lr``) are one line naming
    the nested key that replaced them."""
    with pytest.raises(ConfigError) as e:
        load_config(None, [f"{old}=1"])
    msg = str(e.value)
    assert msg == f"config key '{old}': is now {new} (each recipe is a section); rename the key"


def test_baseline_recipes_are_sections_that_round_trip(tmp_path):
    """``baselines.<method>.*`` loads into the method's recipe dataclass, saves nested and loads
    back equal; unset recipes keep the paper's values."""
    from lira.baselines.clear import ClearConfig
    from lira.baselines.lancer import LancerConfig

    cfg = load_config(None, ["baselines.clear.lr=1e-4", "baselines.lancer.weight=0.5"])
    clear = cfg.baselines.recipe_of("clear", ClearConfig)
    assert (clear.lr, clear.batch_size) == (1e-4, 64)
    assert cfg.baselines.recipe_of("lancer", LancerConfig).weight == 0.5
    assert cfg.baselines.recipes["jsd"] == type(cfg.baselines.recipes["jsd"])()
    data = to_dict(cfg)["baselines"]
    assert data["clear"]["lr"] == 1e-4 and "recipes" not in data and "clear_lr" not in data
    save_config(cfg, tmp_path / "c.yaml")
    assert load_config(tmp_path / "c.yaml") == cfg


@pytest.mark.parametrize(
    ("key", "value", "named"),
    [
        ("train_languages", ["deu"], "'deu' is not an ISO 639-1 language code (use the 2-letter"),
        ("eval_languages", ["de", "german"], "'german' is not an ISO 639-1 language code"),
        ("dev_languages", ["xx"], "'xx' is not an ISO 639-1 language code"),
        ("corpus_language", "eng", "'eng' is not an ISO 639-1 language code"),
    ],
)
def test_data_language_codes_are_iso_639_1(key, value, named):
    """Issue 52, item 4: ``data.train_languages=[deu]`` was accepted silently."""
    from lira.config import ConfigError, DataConfig

    with pytest.raises(ConfigError) as e:
        DataConfig(**{key: value})
    assert f"'{key}'" in str(e.value) and named in str(e.value) and "\n" not in str(e.value)


HOSTILE = {
    "10k-deep-flow": "a: " + "[" * 10_000 + "]" * 10_000 + "\n",
    "10k-deep-map": "a: " + "{a: " * 10_000 + "1" + "}" * 10_000 + "\n",
    "10k-deep-dashes": "a:\n" + "- " * 10_000 + "1\n",
    "200-deep-block": "".join(" " * i + f"k{i}:\n" for i in range(200)) + " " * 200 + "x: 1\n",
    "45k-keys": "".join(f"k{i}: {i}\n" for i in range(45_000)),
    "45k-flow-keys": "{" + ", ".join(f"k{i}: {i}" for i in range(45_000)) + "}\n",
}


@pytest.mark.parametrize("text", list(HOSTILE.values()), ids=list(HOSTILE))
def test_hostile_yaml_is_refused_before_parsing_in_under_a_second(tmp_path, monkeypatch, text):
    """Issue 51, item 7: depth and key counts are refused by a cheap scan of the text (the
    parser took 29 s and 83 s on such files); the YAML parser never starts."""
    import time

    import lira.config_yaml

    def no_parser(*a, **k):
        raise AssertionError("the YAML parser ran")

    monkeypatch.setattr(lira.config_yaml.yaml, "SafeLoader", no_parser)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(text, encoding="utf-8")
    start = time.perf_counter()
    with pytest.raises(ConfigError, match=r"nests deeper than 64 levels|more than a config holds"):
        load_config(cfg)
    assert time.perf_counter() - start < 1.0


def test_the_prescan_lets_every_shipped_config_through():
    from lira.config_yaml import prescan

    for f in sorted((Path(__file__).resolve().parents[1] / "configs").rglob("*.yaml")):
        prescan(f.read_text(encoding="utf-8"), str(f))
    prescan("prompt: 'a [[[[ { ' # [[[[ a comment\nlist: [a, [b, {c: d}]]\n", "c.yaml")
