"""`python -m services.sync`"""

from services.common.server import load_settings, run
from services.sync.app import SyncApp
from services.sync.settings import SyncSettings


def main() -> None:
    settings = load_settings(SyncSettings, "sync")
    run(settings, SyncApp(settings))


if __name__ == "__main__":
    main()
