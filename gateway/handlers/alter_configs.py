"""AlterConfigs (v0-2, replaces a topic's overrides) and IncrementalAlterConfigs (v0-1,
SET / DELETE / APPEND / SUBTRACT). Broker configs are static: altering them is refused."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Protocol, TypeVar

from gateway.context import RequestContext
from gateway.errors import KafkaApiError
from gateway.group_configs import GROUP_CONFIG_DEFS, read_group_configs, validate, write_group_configs
from gateway.groups import group_config
from gateway.topics.configs import TOPIC_CONFIGS, ConfigType
from gateway.topics.naming import invalid_reason
from kafka_wire.errors import ErrorCode
from kafka_wire.messages.alter_configs import AlterConfigsRequest, AlterConfigsResponse
from kafka_wire.messages.incremental_alter_configs import (
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from store.meta.api import BadVersionError, NoNodeError

TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _err(code: ErrorCode, msg: str) -> KafkaApiError:
    return KafkaApiError(int(code), msg)


def _check_resource(ctx: RequestContext, rtype: int, rname: str) -> None:
    if rtype == TOPIC:
        reason = invalid_reason(rname)
        if reason is not None:
            raise _err(ErrorCode.INVALID_TOPIC_EXCEPTION, reason)
        return
    if rtype == GROUP:
        if not rname:
            raise _err(ErrorCode.INVALID_REQUEST, "Group name must not be empty")
        return
    if rtype in (BROKER, BROKER_LOGGER):
        raise _err(ErrorCode.INVALID_REQUEST, "Quire's broker configs are static (set on the command line); "
                   "dynamic broker configs are not supported")
    raise _err(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {rtype}")


async def _alter_topic(ctx: RequestContext, name: str, mutate: Callable[[dict[str, str]], dict[str, str]],
                       validate_only: bool) -> None:
    if await ctx.services.topics.get(name) is None:
        raise _err(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.")
    await ctx.services.topics.modify_configs(name, mutate, validate_only=validate_only)


async def _alter_group(ctx: RequestContext, r: _Resource, validate_only: bool) -> None:
    """Group configs: SET and DELETE (a full AlterConfigs replaces them); the group's configs as
    they would be stored are validated as Kafka 4.4 does (cross-checks see the ones kept too)."""
    incremental = isinstance(r, IncrementalAlterConfigsRequest.AlterConfigsResource)
    ops: list[tuple[int, str, str | None]] = [
        (c.config_operation, c.name, c.value) if incremental else (SET, c.name, c.value)
        for c in r.configs  # type: ignore[attr-defined]
    ]
    for op, name, value in ops:
        if op not in (SET, DELETE):
            raise _err(ErrorCode.INVALID_CONFIG, f"Config value append/subtract is not allowed for config key: {name}")
        if name not in GROUP_CONFIG_DEFS:
            raise _err(ErrorCode.INVALID_CONFIG, f"Unknown group config name: {name}")
        if op == SET and value is None:
            raise _err(ErrorCode.INVALID_CONFIG, f"Null value not supported for : {name}")
    services = ctx.services
    for _ in range(20):
        current, version = await read_group_configs(services.meta, r.resource_name)
        new = dict(current) if incremental else {}
        for op, name, value in ops:
            if op == DELETE:
                new.pop(name, None)
            elif value is not None:
                new[name] = value
        reason = validate(new, services.config.share, group_config(services))
        if reason is not None:
            raise _err(ErrorCode.INVALID_CONFIG, reason)
        if validate_only:
            return
        try:
            await write_group_configs(services.meta, r.resource_name, new, version)
        except (BadVersionError, NoNodeError):
            continue
        services.group_config_cache().invalidate(r.resource_name)  # its watch follows, later
        return
    raise _err(ErrorCode.UNKNOWN_SERVER_ERROR, "group configs kept changing")


def _replace_with(new: dict[str, str]) -> Callable[[dict[str, str]], dict[str, str]]:
    return lambda _old: dict(new)


def _duplicates(resources: list[tuple[int, str]]) -> set[tuple[int, str]]:
    return {k for k, n in Counter(resources).items() if n > 1}


class _Resource(Protocol):
    @property
    def resource_type(self) -> int: ...
    @property
    def resource_name(self) -> str: ...


R = TypeVar("R", bound=_Resource)
T = TypeVar("T")


async def _alter_each(
    ctx: RequestContext, resources: list[R], validate_only: bool,
    mutation: Callable[[R], Callable[[dict[str, str]], dict[str, str]]], response: Callable[..., T],
) -> list[T]:
    """One response per resource: duplicates and non-topic resources refused, else the topic's
    configs changed by `mutation(resource)` (whose own refusals raise KafkaApiError)."""
    dups = _duplicates([(r.resource_type, r.resource_name) for r in resources])
    out = []
    for r in resources:
        try:
            if (r.resource_type, r.resource_name) in dups:
                raise _err(ErrorCode.INVALID_REQUEST, "Duplicate resource.")
            _check_resource(ctx, r.resource_type, r.resource_name)
            if r.resource_type == GROUP:
                await _alter_group(ctx, r, validate_only)
            else:
                await _alter_topic(ctx, r.resource_name, mutation(r), validate_only)
            out.append(response(error_message=None, resource_type=r.resource_type, resource_name=r.resource_name))
        except KafkaApiError as e:
            out.append(response(error_code=e.error_code, error_message=e.message, resource_type=r.resource_type,
                                resource_name=r.resource_name))
    return out


def _replacement(r: AlterConfigsRequest.AlterConfigsResource) -> Callable[[dict[str, str]], dict[str, str]]:
    new: dict[str, str | None] = {c.name: c.value for c in r.configs}
    if None in new.values():
        bad = next(k for k, v in new.items() if v is None)
        raise _err(ErrorCode.INVALID_CONFIG, f"Null value not supported for topic configs: {bad}")
    return _replace_with({k: v for k, v in new.items() if v is not None})


async def alter_configs(ctx: RequestContext, req: AlterConfigsRequest) -> AlterConfigsResponse:
    return AlterConfigsResponse(responses=await _alter_each(
        ctx, req.resources, req.validate_only, _replacement, AlterConfigsResponse.AlterConfigsResourceResponse))


def _incremental(ops: list[IncrementalAlterConfigsRequest.AlterableConfig]) -> Callable[[dict[str, str]], dict[str, str]]:
    dup = [k for k, n in Counter(c.name for c in ops).items() if n > 1]
    if dup:
        raise _err(ErrorCode.INVALID_REQUEST, f"Error due to duplicate config keys: {', '.join(dup)}")
    for c in ops:
        defn = TOPIC_CONFIGS.get(c.name)
        if defn is None:
            raise _err(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {c.name}")
        if c.config_operation not in (SET, DELETE, APPEND, SUBTRACT):
            raise _err(ErrorCode.INVALID_REQUEST, f"Unknown alter configs operation {c.config_operation}")
        if c.config_operation in (APPEND, SUBTRACT) and defn.type != ConfigType.LIST:
            op = "append" if c.config_operation == APPEND else "subtract"
            raise _err(ErrorCode.INVALID_CONFIG, f"Config value {op} is not allowed for config key: {c.name}")
        if c.config_operation != DELETE and c.value is None:
            raise _err(ErrorCode.INVALID_CONFIG, f"Null value not supported for : {c.name}")

    def mutate(current: dict[str, str]) -> dict[str, str]:
        out = dict(current)
        for c in ops:
            if c.config_operation == DELETE:
                out.pop(c.name, None)
                continue
            assert c.value is not None
            if c.config_operation == SET:
                out[c.name] = c.value
                continue
            old = out.get(c.name, TOPIC_CONFIGS[c.name].default)
            items = [x.strip() for x in old.split(",") if x.strip()]
            given = [x.strip() for x in c.value.split(",") if x.strip()]
            if c.config_operation == APPEND:
                items += [x for x in given if x not in items]
            else:
                items = [x for x in items if x not in given]
            out[c.name] = ",".join(items)
        return out

    return mutate


async def incremental_alter_configs(
    ctx: RequestContext, req: IncrementalAlterConfigsRequest
) -> IncrementalAlterConfigsResponse:
    return IncrementalAlterConfigsResponse(responses=await _alter_each(
        ctx, req.resources, req.validate_only, lambda r: _incremental(r.configs),
        IncrementalAlterConfigsResponse.AlterConfigsResourceResponse))
