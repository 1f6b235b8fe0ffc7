"""How one streaming query computes its tables and topics, derived from the graph (no Spark).

A query reads its source once per batch. Its streaming part holds every stateful step once: a
deduplication, an aggregation, or a group of handlers sharing key and input, fused into one
state-store call. What comes after the stateful steps is stateless, so it runs on each
micro-batch inside foreachBatch, from the rows the streaming part emits (its *outputs*). A
handler group also emits its input rows unchanged (passthrough), so the views computed from
that input need no second copy of the deduplication above it. See docs/decisions.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from engine.definitions.expectations import rejects_view
from engine.definitions.pipeline import HandlerSpec, Pipeline, QuerySpec
from engine.definitions.sql import SqlStep
from engine.errors import UserError

__all__ = ["QueryPlan", "StateCall", "StreamOutput", "plan_query"]


@dataclass(frozen=True)
class StateCall:
    """Handlers with the same input (and key), run by one state-store call."""

    input: str
    names: tuple[str, ...]


@dataclass(frozen=True)
class StreamOutput:
    """Rows the streaming part hands to each batch: a streaming view's, or a handler group's
    (its handlers' rows, and its input rows as they came)."""

    view: str | None = None
    handlers: StateCall | None = None
    #: For a handler group: whether its input rows are emitted too (a batch step reads them).
    passthrough: bool = True

    @property
    def binds(self) -> tuple[str, ...]:
        """The views these rows stand for inside a batch."""
        if self.handlers is not None:
            inputs = (self.handlers.input,) if self.passthrough else ()
            return (*inputs, *self.handlers.names)
        return (self.view,) if self.view else ()


@dataclass(frozen=True)
class QueryPlan:
    """A query's streaming outputs and the SQL steps run on each batch, in order."""

    query: QuerySpec
    outputs: tuple[StreamOutput, ...]
    batch_steps: tuple[str, ...]
    #: The SQL steps and handlers of the streaming part, in order: what its checkpoint holds
    #: state and watermarks for (engine/plan/fingerprint.py).
    streaming_steps: tuple[str, ...] = ()
    #: The quarantine table, and the views whose dropped rows (DROP ROW expectations) this
    #: query adds to it: each one's `rejects_view` is among the batch steps.
    quarantine: str | None = None
    drops: tuple[str, ...] = ()
    #: Those of `drops` below a deduplication: their rows were counted as accepted events.
    drops_after_dedup: tuple[str, ...] = ()
    #: Per table the query writes: the views and handlers its rows are computed from.
    reads: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def targets(self) -> list[str]:
        """The views the query writes, in sink order: tables, then topics."""
        return [*self.query.sinks.values(), *self.query.topics.values()]


def is_stateful(step: SqlStep) -> bool:
    """Whether Spark keeps state for the step: a deduplication or an aggregation."""
    return step.distinct or step.aggregates


class _Graph:
    def __init__(
        self,
        pipeline: Pipeline,
        steps: Mapping[str, SqlStep],
        handlers: Mapping[str, HandlerSpec],
        summed: frozenset[str] = frozenset(),
    ) -> None:
        self.pipeline = pipeline
        self.steps = steps
        self.handlers = handlers
        #: Aggregations summed per batch into an `add` table (engine/plan/summed.py).
        self.summed = summed
        self.source = pipeline.source.view
        #: The rows a view drops are computed beside it, from what it reads.
        self.rejects = {rejects_view(name): name for name, step in steps.items() if step.drops}

    def parents(self, view: str) -> list[str]:
        if view in self.handlers:
            return [self.handlers[view].input]
        if view in self.rejects:
            return self.parents(self.rejects[view])
        if view in self.steps:
            known = {*self.steps, *self.handlers, self.source}
            return sorted(r for r in self.steps[view].references if r in known)
        return []

    def stateful(self, view: str) -> bool:
        if view in self.handlers:
            return True
        return view in self.steps and is_stateful(self.steps[view]) and view not in self.summed

    def anchor(self, view: str) -> str | None:
        """The nearest stateful step at or above `view` (None: only stateless steps)."""
        if self.stateful(view):
            return view
        found = {self.anchor(p) for p in self.parents(view)}
        if len(found) > 1:
            names = ", ".join(sorted(str(a) for a in found))
            raise UserError(
                f"{self.steps[view].path}: view {view} combines rows of different stateful "
                f"steps ({names}); one streaming query cannot join them"
            )
        return found.pop() if found else None

    def ancestors(self, view: str) -> set[str]:
        """`view` and every view above it."""
        found, todo = set(), [view]
        while todo:
            name = todo.pop()
            found.add(name)
            todo.extend(self.parents(name))
        return found

    def stateful_above(self, view: str) -> set[str]:
        """Every stateful step at or above `view`."""
        return {name for name in self.ancestors(view) if self.stateful(name)}

    def between(self, bound: set[str], target: str) -> list[str] | None:
        """The steps from the bound views down to `target`, when every path up from it
        reaches a bound view through stateless steps; else None."""
        needed: list[str] = []

        def walk(view: str) -> bool:
            if view in bound:
                return True
            if view in needed:
                return True
            if self.stateful(view) or not (view in self.steps or view in self.rejects):
                return False
            parents = self.parents(view)
            if not parents or not all(walk(p) for p in parents):
                return False
            needed.append(view)
            return True

        return needed if walk(target) else None


def _groups(graph: _Graph, names: Sequence[str]) -> list[StateCall]:
    by_input: dict[str, list[str]] = {}
    for name in names:
        by_input.setdefault(graph.handlers[name].input, []).append(name)
    return [StateCall(inp, tuple(sorted(hs))) for inp, hs in sorted(by_input.items())]


def plan_query(
    pipeline: Pipeline,
    query: QuerySpec,
    steps: Mapping[str, SqlStep],
    order: Sequence[str],
    *,
    quarantine: str | None = None,
    dropped_elsewhere: frozenset[str] = frozenset(),
    summed: frozenset[str] = frozenset(),
) -> QueryPlan:
    """Derive how `query` computes its targets; a UserError when one query cannot hold them.

    When the query writes the `quarantine` table, the rows dropped by the expectations of the
    views it computes go there too, except those of views in `dropped_elsewhere` (an earlier
    query writes them). The aggregations in `summed` run on each batch."""
    graph = _Graph(pipeline, steps, {h.name: h for h in pipeline.handlers}, summed)
    where = f"{pipeline.path}: query {query.name}"
    targets = [*query.sinks.values(), *query.topics.values()]
    drops: list[str] = []
    if quarantine in query.sinks:
        computed = set().union(*(graph.ancestors(t) for t in targets))
        drops = [v for v in order if v in computed and steps.get(v) and steps[v].drops]
        drops = [v for v in drops if v not in dropped_elsewhere]
        targets += [rejects_view(v) for v in drops]
    # The handlers the targets need, wherever they sit above them.
    needed_handlers = sorted(
        {s for t in targets for s in graph.stateful_above(t) if s in graph.handlers}
    )
    groups = _groups(graph, needed_handlers)
    outputs: list[StreamOutput] = [StreamOutput(handlers=g) for g in groups]
    # A stateful step feeding a handler group reaches the batch only through its passthrough.
    passthrough = {graph.anchor(g.input): g for g in groups}
    # A handler reading stateless views anchors nothing: the other stateless targets still
    # need rows of their own.
    passthrough.pop(None, None)
    # The rows a view drops are judged again on the batch, from what the view reads, at the
    # batch's time (engine/runtime/batch_views.py): no second read of the source for them.
    common = [t for t in targets if graph.anchor(t) is None]
    for target in targets:
        anchor = graph.anchor(target)
        if anchor in graph.handlers or anchor in passthrough:
            continue
        if anchor is not None and target in graph.rejects:
            continue  # computed in the batch from the rows of its view's stateful step, if bound
        # Stateless from the source, or below a stateful step nothing else reads here.
        view = target
        if anchor is None:
            view = _deepest_common(graph, common, order)
        output = StreamOutput(view=view)
        if output not in outputs:
            outputs.append(output)
    _check_state_once(graph, outputs, where)
    bound = {b for o in outputs for b in o.binds}
    batch: set[str] = set()
    for target in targets:
        path = graph.between(bound, target)
        if path is None and target in graph.rejects:
            view = graph.rejects[target]
            raise UserError(
                f"{steps[view].path}: the rows view {view} drops (ON VIOLATION DROP ROW) cannot "
                f"reach quarantine in query {query.name}: what it reads is not among the "
                f"query's streaming rows ({', '.join(sorted(bound))}); declare the rule on a "
                "view above the stateful step, or on one that reads the handlers' rows"
            )
        if path is None:
            raise UserError(
                f"{where}: view {target} cannot be computed from this query's streaming rows "
                f"({', '.join(sorted(bound))}); write it from a query of its own"
            )
        batch.update(path)
    # Input rows cross to Python and back only when a batch step or a target reads them.
    read = set(targets) | {p for v in batch for p in graph.parents(v)}
    outputs = [
        replace(o, passthrough=o.handlers.input in read) if o.handlers else o for o in outputs
    ]
    streaming = {a for o in outputs for top in _tops(o) for a in graph.ancestors(top)}
    if query.output_mode == "append":
        _check_append(graph, streaming, query.name)
    # A view's dropped rows are computed right after the view.
    batch_order = [w for v in order for w in (v, rejects_view(v)) if w in batch]
    reads = {table: graph.ancestors(view) for table, view in query.sinks.items()}
    if quarantine in reads:
        reads[quarantine] |= {a for v in drops for a in graph.ancestors(v)}
    return QueryPlan(
        query,
        tuple(outputs),
        tuple(batch_order),
        tuple(v for v in order if v in streaming),
        quarantine=quarantine if quarantine in query.sinks else None,
        drops=tuple(drops),
        drops_after_dedup=tuple(
            v
            for v in drops
            if any(steps[a].distinct for a in graph.ancestors(v) - {v} if a in steps)
        ),
        reads={table: tuple(sorted(views)) for table, views in reads.items()},
    )


def _tops(output: StreamOutput) -> tuple[str, ...]:
    """The views at the bottom of an output's streaming part."""
    if output.handlers is not None:
        return output.handlers.names
    return (output.view,) if output.view else ()


def _deepest_common(graph: _Graph, targets: Sequence[str], order: Sequence[str]) -> str:
    """The latest view every stateless target reads from (the source at worst)."""

    common = set.intersection(*(graph.ancestors(t) for t in targets))
    position = {v: i for i, v in enumerate(order)}
    return max(common, key=lambda v: position.get(v, -1))


def _check_append(graph: _Graph, streaming: set[str], query: str) -> None:
    # Spark refuses this only when the query starts, after a --full-refresh has emptied the
    # tables; refused here, `lint` and `run --dry-run` say it too.
    for view in sorted(streaming):
        step = graph.steps.get(view)
        if step is None or not step.aggregates or view in graph.summed:
            continue
        if not any(graph.steps[a].watermarks for a in graph.ancestors(view) if a in graph.steps):
            raise UserError(
                f"{step.path}: aggregation {view} has no WATERMARK upstream, so query {query} "
                "cannot run in append mode (it emits a group once a watermark closes it); "
                f"set `output_mode: update` for query {query} under `queries:` in "
                f"{graph.pipeline.path} (its tables merge changed groups by key), or add "
                "a WATERMARK to its input"
            )


def _check_state_once(graph: _Graph, outputs: Sequence[StreamOutput], where: str) -> None:
    # Two outputs above the same stateful step would each get a copy of it in the query's
    # plan: state kept twice, and the copies do not drop the same late rows.
    owner: dict[str, str] = {}
    for output in outputs:
        label = output.view or "handlers " + ", ".join(output.handlers.names)  # type: ignore[union-attr]
        tops = (
            graph.stateful_above(output.handlers.input) | set(output.handlers.names)
            if output.handlers
            else graph.stateful_above(output.view)  # type: ignore[arg-type]
        )
        for name in sorted(tops):
            if name in owner:
                raise UserError(
                    f"{where}: {owner[name]} and {label} both need stateful step '{name}' in "
                    "their streaming part; write them from separate queries"
                )
            owner[name] = label
