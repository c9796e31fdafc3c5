"""`python -m services.gateway`"""

from services.common.server import load_settings, run
from services.gateway.app import GatewayApp
from services.gateway.guard import KeyFileError
from services.gateway.settings import GatewaySettings


def main() -> None:
    settings = load_settings(GatewaySettings, "gateway")
    try:
        app = GatewayApp(settings)
    except KeyFileError as exc:
        # A malformed keys file is a bad setting: exit 2 like the others, naming the entry.
        import logging

        from services.common.logs import configure_logging

        configure_logging("gateway")
        logging.getLogger("citeweave.gateway").error(f"invalid setting: {exc}")
        raise SystemExit(2) from None
    run(settings, app)


if __name__ == "__main__":
    main()
