"""The gateway gRPC service (GenerateRelatedWork, Answer, SearchPapers, GetInfo) and, in the same
process and event loop, the web page and JSON HTTP API.

Every call is authenticated and admitted by the Guard before any work starts; the client's
deadline (or the endpoint's request_timeout_s) bounds the whole pipeline. When a client
disconnects, grpc.aio cancels the handler, which cancels the pipeline task and its downstream calls.
"""

from __future__ import annotations

import logging
import ssl

import grpc
from aiohttp import web

from citeweave.gateway.v1 import gateway_pb2 as gw
from citeweave.gateway.v1 import gateway_pb2_grpc
from services.gateway.core import Gateway
from services.gateway.guard import Guard
from services.gateway.settings import GatewaySettings

log = logging.getLogger("citeweave.gateway")

SERVICE_NAME = gw.DESCRIPTOR.services_by_name["GatewayService"].full_name
API_KEY_METADATA = "x-api-key"


def _api_key(context: grpc.aio.ServicerContext) -> str | None:
    for key, value in context.invocation_metadata() or ():
        if key == API_KEY_METADATA:
            return value
    return None


class GatewayServicer(gateway_pb2_grpc.GatewayServiceServicer):
    def __init__(self, app: "GatewayApp"):
        self.app = app

    def _tenant(self, context) -> str:
        return self.app.guard.authenticate(_api_key(context), context.peer())

    async def GenerateRelatedWork(self, request, context):
        async with self.app.guard.admit(self._tenant(context)):
            async for event in self.app.gateway.generate(request, context.time_remaining()):
                yield event

    async def Answer(self, request, context):
        async with self.app.guard.admit(self._tenant(context)):
            async for event in self.app.gateway.answer(request, context.time_remaining()):
                yield event

    async def SearchPapers(self, request, context):
        async with self.app.guard.admit(self._tenant(context)):
            return await self.app.gateway.search(request, context.time_remaining())

    async def GetInfo(self, request, context):
        # Open without a key, like GET /api/v1/info: a client learns here that it needs one.
        info = await self.app.gateway.info()
        info.auth_required = self.app.guard.auth_required
        return info


class GatewayApp:
    """ServiceApp for services.common.server."""

    name = "gateway"
    service_names = (SERVICE_NAME,)

    def __init__(self, settings: GatewaySettings):
        self.settings = settings
        self.guard = Guard(settings)
        self.gateway: Gateway | None = None
        self._http: web.AppRunner | None = None
        self.http_port = 0

    def server_credentials(self) -> grpc.ServerCredentials | None:
        """TLS for gRPC when a certificate is configured (services.common.server asks)."""
        if self.settings.tls_cert_file is None:
            return None
        return grpc.ssl_server_credentials([(self.settings.tls_key_file.read_bytes(),
                                             self.settings.tls_cert_file.read_bytes())])

    def register(self, server: grpc.aio.Server) -> None:
        gateway_pb2_grpc.add_GatewayServiceServicer_to_server(GatewayServicer(self), server)

    async def warm_up(self) -> None:
        from services.gateway.http_api import build_http_app

        self.gateway = Gateway(self.settings)
        # Cancelling the handler when the browser goes away is what stops downstream work.
        self._http = web.AppRunner(build_http_app(self.gateway, self.guard),
                                   handler_cancellation=True, access_log=None)
        await self._http.setup()
        site = web.TCPSite(self._http, self.settings.host, self.settings.http_port,
                           ssl_context=self._ssl_context())
        await site.start()
        self.http_port = site._server.sockets[0].getsockname()[1]
        scheme = "https" if self.settings.tls_cert_file else "http"
        log.info("web page and HTTP API listening",
                 extra={"url": f"{scheme}://{self.settings.host}:{self.http_port}/",
                        "auth": self.guard.auth_required})

    def _ssl_context(self) -> ssl.SSLContext | None:
        if self.settings.tls_cert_file is None:
            return None
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.settings.tls_cert_file, self.settings.tls_key_file)
        return context

    async def close(self) -> None:
        if self._http is not None:
            await self._http.cleanup()
        if self.gateway is not None:
            await self.gateway.close()
