"""`python -m services.embedder`: the embedder as its own process."""

from services.common.server import load_settings, run
from services.embedder.app import EmbedderApp
from services.embedder.settings import EmbedderSettings


def main() -> None:
    settings = load_settings(EmbedderSettings, "embedder")
    run(settings, EmbedderApp(settings))


if __name__ == "__main__":
    main()
