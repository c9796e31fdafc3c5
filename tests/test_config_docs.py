from scripts.gen_config_docs import DOC, render


def test_configuration_doc_matches_the_settings_classes() -> None:
    assert DOC.read_text() == render(), "docs/configuration.md is stale: run scripts/gen_config_docs.py"
