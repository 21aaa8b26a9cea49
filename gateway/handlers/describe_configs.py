"""DescribeConfigs (v1-4): topic configs (overrides, defaults, synonyms), this gateway's
broker configs and group configs (gateway/group_configs.py)."""

from __future__ import annotations

from gateway.context import RequestContext
from gateway.errors import KafkaApiError
from gateway.group_configs import group_entries, read_group_configs
from gateway.groups import group_config
from gateway.topics.describe import ConfigEntry, broker_entries, topic_entries
from gateway.topics.naming import invalid_reason
from kafka_wire.errors import ErrorCode
from kafka_wire.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResponse

TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32
Result = DescribeConfigsResponse.DescribeConfigsResult
Entry = DescribeConfigsResponse.DescribeConfigsResourceResult
Syn = DescribeConfigsResponse.DescribeConfigsSynonym


async def entries_for(ctx: RequestContext, rtype: int, rname: str) -> list[ConfigEntry]:
    services = ctx.services
    if rtype == TOPIC:
        reason = invalid_reason(rname)
        if reason is not None:
            raise KafkaApiError(int(ErrorCode.INVALID_TOPIC_EXCEPTION), reason)
        info = await services.topics.get_fresh(rname)
        if info is None:
            raise KafkaApiError(int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), f"Topic '{rname}' does not exist.")
        return topic_entries(info.configs)
    if rtype in (BROKER, BROKER_LOGGER):
        if rname != "":
            try:
                node = int(rname)
            except ValueError:
                raise KafkaApiError(int(ErrorCode.INVALID_REQUEST), f"Broker id must be an integer, got {rname!r}") from None
            if node != services.node_id:
                raise KafkaApiError(int(ErrorCode.INVALID_REQUEST), f"Unexpected broker id, expected "
                                    f"{services.node_id} or empty string, but received {rname}")
        if rtype == BROKER_LOGGER or rname == "":
            return []  # no dynamic (cluster-default) broker configs, no logger configs
        gw = services.cluster.gateways()
        me = next((g for g in gw if g.node_id == services.node_id), None)
        adv = (me.host, me.port) if me is not None else services.config.advertised()
        return broker_entries(services.config, services.node_id, adv)
    if rtype == GROUP:
        overrides, _ = await read_group_configs(services.meta, rname)  # read fresh, as for a topic
        return group_entries(overrides, services.config.share, group_config(services), services.config.broker_settings)
    raise KafkaApiError(int(ErrorCode.INVALID_REQUEST), f"Unsupported resource type {rtype}")


def _entry(e: ConfigEntry, version: int, synonyms: bool, docs: bool) -> Entry:
    entry = Entry(
        name=e.name, value=e.value, read_only=e.read_only, config_source=int(e.source), is_sensitive=False,
        synonyms=[Syn(name=s.name, value=s.value, source=int(s.source)) for s in e.synonyms] if synonyms else [],
    )
    if version >= 3:  # fields that do not exist before v3 must keep their defaults
        entry.config_type = int(e.type)
        entry.documentation = e.doc if docs else None
    return entry


async def describe_configs(ctx: RequestContext, req: DescribeConfigsRequest) -> DescribeConfigsResponse:
    v = ctx.api_version
    out: list[Result] = []
    for r in req.resources:
        try:
            entries = await entries_for(ctx, r.resource_type, r.resource_name)
        except KafkaApiError as e:
            out.append(Result(error_code=e.error_code, error_message=e.message, resource_type=r.resource_type,
                              resource_name=r.resource_name))
            continue
        if r.configuration_keys is not None:
            keys = set(r.configuration_keys)
            entries = [e for e in entries if e.name in keys]
        out.append(Result(error_message=None, resource_type=r.resource_type, resource_name=r.resource_name,
                          configs=[_entry(e, v, req.include_synonyms, v >= 3 and req.include_documentation)
                                   for e in entries]))
    return DescribeConfigsResponse(results=out)
