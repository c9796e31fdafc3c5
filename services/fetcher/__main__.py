"""`python -m services.fetcher`"""

from services.common.server import load_settings, run
from services.fetcher.app import FetcherApp
from services.fetcher.settings import FetcherSettings


def main() -> None:
    settings = load_settings(FetcherSettings, "fetcher")
    run(settings, FetcherApp(settings))


if __name__ == "__main__":
    main()
