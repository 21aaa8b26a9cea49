"""The options of the `quire` data source: Spark's Kafka source's names and meanings (so a job
switches by changing the format name), plus `quire.meta` and the offload tier's settings
(`quire.offload.*`, `quire.config`: a server.properties holding them). Parsing and validation only; every
error names the option, worded as Spark's Kafka source words it where it has the same check."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from store.offload import OffloadSettings

EARLIEST = -2  # Spark's (and Kafka's ListOffsets') sentinels in per-partition JSON
LATEST = -1

TopicPartition = tuple[str, int]
# A bound: "earliest", "latest", per-partition offsets, or per-partition / global timestamps.
Bound = (
    tuple[Literal["earliest"]]
    | tuple[Literal["latest"]]
    | tuple[Literal["offsets"], dict[TopicPartition, int]]
    | tuple[Literal["timestamps"], dict[TopicPartition, int]]
    | tuple[Literal["timestamp"], int]
)

STRATEGIES = ("error", "latest")
SLICE_BYTES = 128 << 20  # consecutive ledgers merged into one Spark task up to this size


class OptionError(ValueError):
    """An invalid option (Spark's Kafka source raises IllegalArgumentException)."""


@dataclass
class SourceOptions:
    meta_url: str
    subscribe: list[str] | None = None
    pattern: re.Pattern[str] | None = None
    assign: list[TopicPartition] | None = None
    starting: Bound = ("earliest",)
    ending: Bound = ("latest",)
    timestamp_strategy: str = "error"
    max_offsets_per_trigger: int | None = None
    include_headers: bool = False
    fail_on_data_loss: bool = True
    read_committed: bool = False  # kafka.isolation.level
    slice_bytes: int = SLICE_BYTES
    max_bytes_per_second: int | None = None  # quire.maxBytesPerSecond: each task's read rate, at most
    # quire.cpuHeadroom: the share of the machine's CPU a task leaves idle; None: the default
    # (pacing.DEFAULT_HEADROOM on a machine that holds one of the cluster's bookies, else none)
    cpu_headroom: float | None = None
    # Settings, not a tier: each task builds its own tier (thread pool, S3 client) from them.
    offload: OffloadSettings | None = None


def meta_url(value: str) -> str:
    """`quire.meta`: a zk:// or embedded:// URL, or a standalone's data dir (its embedded store)."""
    v = value.strip()
    if v.startswith(("zk://", "embedded://")):
        return v
    if not v:
        raise OptionError("Option 'quire.meta' must be zk://host:port/chroot or a standalone's data dir")
    meta = os.path.abspath(os.path.join(v, "meta"))
    if not os.path.isdir(meta):  # opening it would create an empty store: a typo would read nothing
        raise OptionError(f"Option 'quire.meta' is {value!r}: neither zk://host:port/chroot nor a standalone's "
                          f"data dir (no {meta})")
    return f"embedded://{meta}"


def offload(opts: Mapping[str, str]) -> OffloadSettings | None:
    """The offload tier of options named as the settings (`quire.offload.driver`, ...), over
    `quire.config`'s file and QUIRE_OFFLOAD_*, defaulting as `quire admin` does: the fs tier
    under the data dir when `quire.meta` is one; None when offload is off."""
    # Imported here: quire.settings pulls in every component's config (~0.2 s), which Spark's
    # Python workers that only unpickle a reader (the tasks) do not need.
    from quire import settings as st

    given = {k: v for k, v in opts.items() if k.startswith("quire.offload.")}
    meta = opts.get("quire.meta", "").strip()
    data_dir = None if meta.startswith(("zk://", "embedded://")) or not meta else os.path.abspath(meta)
    try:
        r = st.resolve(st.GATEWAY, None, file=opts.get("quire.config"), given=given)
        return st.offload_settings(r, data_dir or r.get_value("quire.data.dir"))
    except st.SettingsError as e:
        raise OptionError(f"Invalid offload option: {e}") from None


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {k.lower(): str(v) for k, v in options.items()}


def _partition_json(name: str, text: str) -> dict[TopicPartition, int]:
    """Spark's per-partition JSON: {"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}."""
    try:
        doc = json.loads(text)
        out = {(str(t), int(p)): int(v) for t, parts in doc.items() for p, v in parts.items()}
    except (ValueError, AttributeError, TypeError):
        raise OptionError(
            f"Expected e.g. {{\"topicA\":{{\"0\":23,\"1\":-1}},\"topicB\":{{\"0\":-2}}}} "
            f"for option '{name}', got {text}"
        ) from None
    return out


def _assign_json(text: str) -> list[TopicPartition]:
    """Spark's `assign` JSON: {"topicA":[0,1],"topicB":[2,4]}."""
    try:
        doc = json.loads(text)
        out = [(str(t), int(p)) for t, parts in doc.items() for p in parts]
    except (ValueError, AttributeError, TypeError):
        raise OptionError(
            f"Expected e.g. {{\"topicA\":[0,1],\"topicB\":[0,1]}} for option 'assign', got {text}"
        ) from None
    return out


def _bound(opts: dict[str, str], which: Literal["starting", "ending"]) -> Bound | None:
    off_key, ts_key, by_ts_key = f"{which}offsets", f"{which}timestamp", f"{which}offsetsbytimestamp"
    name = {"starting": "startingOffsets", "ending": "endingOffsets"}[which]
    if ts_key in opts:
        try:
            return ("timestamp", int(opts[ts_key]))
        except ValueError:
            raise OptionError(f"Option '{which}Timestamp' must be a number of milliseconds, got "
                              f"{opts[ts_key]}") from None
    if by_ts_key in opts:
        return ("timestamps", _partition_json(f"{which}OffsetsByTimestamp", opts[by_ts_key]))
    if off_key in opts:
        v = opts[off_key].strip()
        if v.lower() == "earliest":
            return ("earliest",)
        if v.lower() == "latest":
            return ("latest",)
        return ("offsets", _partition_json(name, v))
    return None


def _int_option(opts: dict[str, str], key: str, name: str) -> int | None:
    if key not in opts:
        return None
    try:
        n = int(opts[key])
    except ValueError:
        n = 0
    if n <= 0:
        raise OptionError(f"Invalid value '{opts[key]}' for option '{name}', must be a positive integer")
    return n


def _share_option(opts: dict[str, str], key: str, name: str) -> float | None:
    """A share from 0 up to (not including) 1; absent: None."""
    if key not in opts:
        return None
    try:
        v = float(opts[key])
    except ValueError:
        v = -1.0
    if not 0.0 <= v < 1.0:
        raise OptionError(f"Invalid value '{opts[key]}' for option '{name}', must be a number from 0 up to (not "
                          f"including) 1")
    return v


def _bool_option(opts: dict[str, str], key: str, name: str, default: bool) -> bool:
    if key not in opts:
        return default
    v = opts[key].strip().lower()
    if v not in ("true", "false"):
        raise OptionError(f"Invalid value '{opts[key]}' for option '{name}', must be true or false")
    return v == "true"


ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
ISOLATION_KEYS = ("kafka.isolation.level", "isolation.level")  # Spark's name (a consumer setting), bare


def _isolation(opts: dict[str, str]) -> bool:
    """read_committed? Kafka's consumer setting, passed as Spark's Kafka source passes it."""
    levels = {}
    for key in ISOLATION_KEYS:
        if key in opts:
            v = opts[key].strip().lower()
            if v not in ISOLATION_LEVELS:
                raise OptionError(f"Invalid value '{opts[key]}' for option '{key}', must be one of "
                                  f"{', '.join(ISOLATION_LEVELS)}")
            levels[key] = v
    if len(set(levels.values())) > 1:
        raise OptionError(f"Options '{ISOLATION_KEYS[0]}' and '{ISOLATION_KEYS[1]}' disagree")
    return "read_committed" in levels.values()


def parse(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """Validated source options (keys are case-insensitive, as in Spark)."""
    opts = _lower(options)
    if "quire.meta" not in opts:
        raise OptionError("Option 'quire.meta' must be specified for the quire source "
                          "(zk://host:port/chroot or a standalone's data dir)")
    out = SourceOptions(meta_url(opts["quire.meta"]))
    given = [k for k in ("subscribe", "subscribepattern", "assign") if k in opts]
    if not given:
        raise OptionError("One of the following options must be specified for Kafka source: "
                          "subscribe, subscribePattern, assign. See the docs for more details.")
    if len(given) > 1:
        raise OptionError("Only one of the following options can be specified for Kafka source: "
                          "subscribe, subscribePattern, assign. See the docs for more details.")
    if "subscribe" in opts:
        topics = [t.strip() for t in opts["subscribe"].split(",") if t.strip()]
        if not topics:
            raise OptionError(f"No topics to subscribe to as specified value for option 'subscribe' "
                              f"is '{opts['subscribe']}'")
        out.subscribe = topics
    elif "subscribepattern" in opts:
        text = opts["subscribepattern"].strip()
        if not text:
            raise OptionError(f"Pattern to subscribe is empty as specified value for option "
                              f"'subscribePattern' is '{opts['subscribepattern']}'")
        try:
            out.pattern = re.compile(text)
        except re.error as e:
            raise OptionError(f"Invalid value for option 'subscribePattern': {e}") from None
    else:
        text = opts["assign"].strip()
        if not text.startswith("{"):
            raise OptionError(f"No topicpartitions to assign as specified value for option 'assign' "
                              f"is '{opts['assign']}'")
        out.assign = _assign_json(text)
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in STRATEGIES:
        raise OptionError(f"Invalid value '{strategy}' for option 'startingOffsetsByTimestampStrategy', "
                          f"must be one of {', '.join(STRATEGIES)}")
    out.timestamp_strategy = strategy
    starting = _bound(opts, "starting")
    ending = _bound(opts, "ending")
    if streaming:
        if ending is not None:
            raise OptionError("Ending offset not valid in streaming queries: option 'endingOffsets'")
        out.starting = starting or ("latest",)
    else:
        out.starting = starting or ("earliest",)
        out.ending = ending or ("latest",)
        _check_batch_bounds(out.starting, out.ending)
    out.max_offsets_per_trigger = _int_option(opts, "maxoffsetspertrigger", "maxOffsetsPerTrigger")
    out.include_headers = _bool_option(opts, "includeheaders", "includeHeaders", False)
    out.fail_on_data_loss = _bool_option(opts, "failondataloss", "failOnDataLoss", True)
    out.read_committed = _isolation(opts)
    out.slice_bytes = _int_option(opts, "quire.slicebytes", "quire.sliceBytes") or SLICE_BYTES
    out.max_bytes_per_second = _int_option(opts, "quire.maxbytespersecond", "quire.maxBytesPerSecond")
    out.cpu_headroom = _share_option(opts, "quire.cpuheadroom", "quire.cpuHeadroom")
    out.offload = offload(opts)
    return out


def _check_batch_bounds(starting: Bound, ending: Bound) -> None:
    """Spark's KafkaSourceProvider.validateBatchOptions."""
    if starting[0] == "latest":
        raise OptionError("starting offset can't be latest for batch queries on Kafka "
                          "(option 'startingOffsets')")
    if starting[0] == "offsets":
        for (t, p), off in starting[1].items():
            if off == LATEST:
                raise OptionError(f"startingOffsets for {t}-{p} can't be latest for batch queries on Kafka")
    if ending[0] == "earliest":
        raise OptionError("ending offset can't be earliest for batch queries on Kafka (option 'endingOffsets')")
    if ending[0] == "offsets":
        for (t, p), off in ending[1].items():
            if off == EARLIEST:
                raise OptionError(f"endingOffsets for {t}-{p} can't be earliest for batch queries on Kafka")
