"""The `build` fixture: every Envoy test that takes it runs through both
builds of the filter, the .wasm ([wasm]) and the dynamic module ([so]).
Module-scoped, so pytest runs a module's tests of one build together and
a module-scoped Envoy of that build serves all of them. A build that is
missing fails its tests (proxy.Build raises); nothing is skipped. `so`
is the dynamic module alone, for what only it has; `up` a module's
recording upstream (upstream.py)."""

import pytest

import proxy
import upstream


@pytest.fixture(scope="module", params=list(proxy.BUILDS))
def build(request):
    return proxy.Build(request.param)


@pytest.fixture(scope="module")
def so():
    return proxy.Build("so")


@pytest.fixture(scope="module")
def up():
    u = upstream.start()
    yield u
    u.shutdown()
