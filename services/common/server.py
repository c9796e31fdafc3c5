"""grpc.aio server bootstrap shared by every service.

Health is NOT_SERVING from the moment the port is bound until the service's warm-up finished
(model loaded, store opened); SIGTERM flips it to NOT_SERVING for good, waits `drain_s` so load
balancers stop sending, then stops with `grace_s` for in-flight calls.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from dataclasses import dataclass
from typing import Protocol, TypeVar

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from prometheus_client import start_http_server
from pydantic import ValidationError

from services.common.interceptor import ErrorInterceptor
from services.common.logs import configure_logging
from services.common.settings import ServiceSettings

log = logging.getLogger("citeweave.server")


class ServiceApp(Protocol):
    """What a service hands to the bootstrap."""

    name: str
    # Fully qualified gRPC service names, e.g. "citeweave.embedder.v1.EmbedderService".
    service_names: tuple[str, ...]

    def register(self, server: grpc.aio.Server) -> None: ...

    async def warm_up(self) -> None: ...

    async def close(self) -> None: ...


@dataclass
class BuiltServer:
    server: grpc.aio.Server
    port: int
    health: health.aio.HealthServicer


def grpc_options(settings: ServiceSettings) -> list[tuple[str, int]]:
    size = settings.max_message_mb * 1024 * 1024
    options = [("grpc.max_send_message_length", size), ("grpc.max_receive_message_length", size)]
    if settings.max_connection_age_s > 0:
        # GOAWAY now and then makes clients reconnect and re-resolve, so they find new replicas.
        options += [
            ("grpc.max_connection_age_ms", max(1, round(settings.max_connection_age_s * 1000))),
            ("grpc.max_connection_age_grace_ms",
             round(settings.max_connection_age_grace_s * 1000)),
        ]
    return options


def build_server(settings: ServiceSettings, app: ServiceApp) -> BuiltServer:
    """Creates the server with interceptor, health (all NOT_SERVING), reflection; binds the port."""
    server = grpc.aio.server(interceptors=[ErrorInterceptor()], options=grpc_options(settings))
    app.register(server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        (*app.service_names, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
         reflection.SERVICE_NAME),
        server,
    )
    # A service that serves TLS (the gateway, when a certificate is configured) says so.
    credentials = getattr(app, "server_credentials", lambda: None)()
    address = f"{settings.host}:{settings.port}"
    port = (server.add_secure_port(address, credentials) if credentials is not None
            else server.add_insecure_port(address))
    if port == 0:
        raise RuntimeError(f"could not bind {settings.host}:{settings.port}")
    return BuiltServer(server=server, port=port, health=health_servicer)


async def set_serving(built: BuiltServer, app: ServiceApp, serving: bool) -> None:
    status = (
        health_pb2.HealthCheckResponse.SERVING
        if serving
        else health_pb2.HealthCheckResponse.NOT_SERVING
    )
    for name in ("", *app.service_names):
        await built.health.set(name, status)


async def listen(settings: ServiceSettings, app: ServiceApp) -> BuiltServer:
    """Binds and starts the server with health NOT_SERVING, so probes answer during warm-up."""
    built = build_server(settings, app)
    await set_serving(built, app, False)
    await built.server.start()
    log.info("listening", extra={"host": settings.host, "port": built.port, "state": "NOT_SERVING"})
    return built


async def warm(built: BuiltServer, app: ServiceApp) -> None:
    await app.warm_up()
    await set_serving(built, app, True)
    log.info("serving", extra={"port": built.port})


async def start(settings: ServiceSettings, app: ServiceApp) -> BuiltServer:
    built = await listen(settings, app)
    await warm(built, app)
    return built


async def shutdown(built: BuiltServer, app: ServiceApp, settings: ServiceSettings) -> None:
    await built.health.enter_graceful_shutdown()
    log.info("draining", extra={"drain_s": settings.drain_s})
    await asyncio.sleep(settings.drain_s)
    await built.server.stop(settings.grace_s)
    await app.close()
    log.info("stopped")


async def serve(settings: ServiceSettings, app: ServiceApp) -> None:
    configure_logging(app.name, settings.log_level)
    if settings.metrics_port:
        start_http_server(settings.metrics_port, addr=settings.host)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    # Warm-up can take minutes (model load); a SIGTERM during it must still stop the process.
    start_task = asyncio.create_task(start(settings, app))
    stop_task = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait({start_task, stop_task}, return_when=asyncio.FIRST_COMPLETED)
    if start_task not in done:
        start_task.cancel()
        log.info("stopped during warm-up")
        await app.close()
        return
    built = start_task.result()
    await stop_task
    await shutdown(built, app, settings)


SettingsT = TypeVar("SettingsT", bound=ServiceSettings)


def load_settings(settings_cls: type[SettingsT], service: str) -> SettingsT:
    """Reads the service's settings from the environment. A bad value ends the process with
    exit code 2 and one log line per problem, naming the variable, the value and the rule."""
    try:
        return settings_cls()
    except ValidationError as exc:
        configure_logging(service)
        prefix = settings_cls.model_config.get("env_prefix", "")
        for error in exc.errors(include_url=False):
            field = "_".join(str(part) for part in error["loc"])
            # Cross-field rules (model validators) have no location; their message names fields.
            where = f"{prefix}{field.upper()}={error['input']!r}: " if field else ""
            log.error(f"invalid setting: {where}{error['msg']}", extra={"setting": field})
        raise SystemExit(2) from None


def run(settings: ServiceSettings, app: ServiceApp) -> None:
    """Entry point for `python -m services.<svc>`."""
    try:
        asyncio.run(serve(settings, app))
    except Exception:
        logging.getLogger(f"citeweave.{app.name}").exception("service failed")
        raise SystemExit(1) from None
