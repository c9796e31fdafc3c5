"""`python -m services.generator`"""

from services.common.server import load_settings, run
from services.generator.app import GeneratorApp
from services.generator.settings import GeneratorSettings


def main() -> None:
    settings = load_settings(GeneratorSettings, "generator")
    run(settings, GeneratorApp(settings))


if __name__ == "__main__":
    main()
