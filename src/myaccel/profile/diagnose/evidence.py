"""Building findings (evidence, rule effects, the catalogue's texts) and showing them."""

from __future__ import annotations

from collections.abc import Sequence

from myaccel.profile.diagnose.catalog import FINDINGS
from myaccel.profile.records import Evidence, Finding, RuleEffect


def evidence(
    metric: str,
    value: float,
    unit: str,
    source: str,
    threshold: str = "",
    detail: str = "",
) -> Evidence:
    return Evidence(
        metric=metric,
        value=round(value, 3),
        unit=unit,
        source=source,
        threshold=threshold,
        detail=detail,
    )


def share_evidence(
    metric: str, value: float, source: str, at_least_pct: float, detail: str = ""
) -> Evidence:
    """A percentage that crossed its threshold (``>= N%``)."""
    return evidence(metric, value, "%", source, f">= {at_least_pct:g}%", detail)


def raise_rule(rule: str, reason: str) -> RuleEffect:
    return RuleEffect(rule=rule, direction="raise", reason=reason)


def lower_rule(rule: str, reason: str) -> RuleEffect:
    return RuleEffect(rule=rule, direction="lower", reason=reason)


def finding(fid: str, *, high: bool, evidence: list[Evidence], rules: list[RuleEffect]) -> Finding:
    """The finding ``fid`` of the catalogue with its evidence and rule effects; medium
    severity unless ``high``."""
    text = FINDINGS[fid]
    return Finding(
        id=fid,
        title=text.title,
        severity="high" if high else "medium",
        evidence=evidence,
        likely_cause=text.likely_cause,
        rules=rules,
        confirm=text.confirm,
    )


def format_findings(findings: Sequence[Finding]) -> str:
    """Plain text for a terminal or a report section."""
    if not findings:
        return "no findings: nothing in this profile crossed a threshold"
    out: list[str] = []
    for f in findings:
        out.append(f"[{f.severity}] {f.id}: {f.title}")
        for e in f.evidence:
            thr = f" (threshold {e.threshold})" if e.threshold else ""
            det = f" [{e.detail}]" if e.detail else ""
            unit = e.unit if e.unit in ("%", "x", "") else f" {e.unit}"
            out.append(f"  evidence: {e.metric} = {e.value:g}{unit}{thr}; {e.source}{det}")
        out.append(f"  likely cause: {f.likely_cause}")
        for r in f.rules:
            out.append(f"  {r.direction}s {r.rule}: {r.reason}")
        out.append(f"  confirm: {f.confirm}")
    return "\n".join(out)
