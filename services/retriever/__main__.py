"""`python -m services.retriever`"""

from services.common.server import load_settings, run
from services.retriever.app import RetrieverApp
from services.retriever.settings import RetrieverSettings


def main() -> None:
    settings = load_settings(RetrieverSettings, "retriever")
    run(settings, RetrieverApp(settings))


if __name__ == "__main__":
    main()
