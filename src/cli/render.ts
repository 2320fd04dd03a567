// mmctl's human output: what a person reads in a terminal. Scripts use --output json instead.
import Table from 'cli-table3';
import prettyMs from 'pretty-ms';
import type { Condition } from '../core/api.js';
import type { ModelListing, ModelStatus } from './model-workflows.js';
import type { RoundRecord } from './rounds.js';
import type { RoundOutcome } from '../../workflows/definitions.js';

const when = (iso: string) => iso.replace('T', ' ').replace(/\.\d+Z$/, 'Z');
const took = (ms: number) => prettyMs(ms, { secondsDecimalDigits: 1, millisecondsDecimalDigits: 0 });

/** A borderless table aligned like kubectl's. */
function table(head: string[], rows: string[][]): string {
  const t = new Table({
    head,
    chars: {
      top: '',
      'top-mid': '',
      'top-left': '',
      'top-right': '',
      bottom: '',
      'bottom-mid': '',
      'bottom-left': '',
      'bottom-right': '',
      left: '',
      'left-mid': '',
      mid: '',
      'mid-mid': '',
      right: '',
      'right-mid': '',
      middle: '   ',
    },
    style: { head: [], border: [], 'padding-left': 0, 'padding-right': 0 },
  });
  t.push(...rows);
  return t
    .toString()
    .split('\n')
    .map((l) => l.trimEnd())
    .join('\n');
}

function phaseChange(r: RoundRecord): string | undefined {
  if (!r.phaseAfter) return undefined;
  return r.phaseBefore && r.phaseBefore !== r.phaseAfter
    ? `${r.phaseBefore} → ${r.phaseAfter}`
    : r.phaseBefore
      ? `${r.phaseAfter} (unchanged)`
      : `→ ${r.phaseAfter}`;
}

/** One round as a block of labelled lines, indented by `indent`. */
export function renderRound(r: RoundRecord, indent = ''): string {
  const lines = [`${indent}${when(r.startedAt)}, took ${took(r.durationMs)}`];
  const add = (label: string, value: string | undefined) => {
    if (value) lines.push(`${indent}  ${label.padEnd(8)} ${value}`);
  };
  add('trigger', r.triggers.join(', ') || 'none recorded');
  add('changed', r.changes.join(', ') || 'nothing');
  add('phase', phaseChange(r));
  add('saw', r.gone ? 'the MachineModel is gone' : r.readiness);
  for (const e of r.errors) add('error', e);
  return lines.join('\n');
}

export function renderHistory(model: string, rounds: RoundRecord[]): string {
  if (rounds.length === 0) return `${model}: no rounds yet`;
  const header = `${model}: the last ${rounds.length === 1 ? 'round' : `${rounds.length} rounds`}, oldest first`;
  return [header, ...rounds.map((r) => renderRound(r, '  '))].join('\n');
}

function conditionLine(c: Condition): string {
  return `${c.type}=${c.status} ${c.reason}${c.message ? `: ${c.message}` : ''}`;
}

/** What `resync --wait` prints: the outcome of the round it asked for. */
export function renderOutcome(model: string, o: RoundOutcome): string {
  const lines = [`${model}: round ${o.round}, phase ${o.phase ?? 'unknown'}${o.finished ? ' (finished)' : ''}`];
  lines.push(`  changes: ${o.changes.length ? o.changes.join(', ') : 'none'}`);
  for (const c of o.conditions) lines.push(`  ${conditionLine(c)}`);
  if (o.message) lines.push(`  ${o.message}`);
  return lines.join('\n');
}

export function renderStatus(s: ModelStatus): string {
  const lines = [
    `${s.model}: phase ${s.phase ?? 'unknown'}, workflow ${s.workflowStatus}`,
    `  workflow   ${s.workflowId} (run ${s.runId})`,
  ];
  if (s.rounds !== undefined) lines.push(`  counters   ${s.rounds} rounds, ${s.signals} signals, ${s.runs} runs`);
  for (const c of s.conditions) lines.push(`  condition  ${conditionLine(c)}`);
  lines.push(`  pending    ${s.pending.length ? s.pending.join('; ') : 'nothing'}`);
  lines.push(s.lastRound ? `  last round:\n${renderRound(s.lastRound, '    ')}` : '  last round: none yet');
  return lines.join('\n');
}

export function renderList(models: ModelListing[]): string {
  if (models.length === 0) return 'no MachineModel workflows found';
  return table(
    ['MODEL', 'PHASE', 'WORKFLOW', 'STARTED'],
    models.map((m) => [m.model, m.phase ?? '-', m.workflowStatus, when(m.startedAt)]),
  );
}
