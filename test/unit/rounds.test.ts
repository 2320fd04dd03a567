import { readFileSync } from 'node:fs';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils.js';
import { describe, expect, it } from 'vitest';
import { roundsOf, type HistoryEvent } from '../../src/cli/rounds.js';
import { renderHistory } from '../../src/cli/render.js';

const recorded = (file: string): HistoryEvent[] =>
  historyFromJSON(JSON.parse(readFileSync(new URL(`../histories/${file}`, import.meta.url), 'utf8'))).events ?? [];

describe('rounds read back from a recorded history', () => {
  it('tells each round of local-activity steps: trigger, changes, phase, readiness; own echoes wake none', () => {
    const rounds = roundsOf('r1', recorded('retired/no-gateway-update-drift-delete-before-read-and-apply.json'));
    expect(rounds.map((r) => r.triggers)).toEqual([
      ['workflow started', 'MachineModel added (generation 1)'],
      ['Deployment updated and 3 more events'],
      ['MachineModel updated (generation 2)'],
      ['Deployment updated and 7 more events'],
      ['Deployment updated', 'Deployment updated and 1 more event'],
      ['Deployment updated and 3 more events'],
      ['MachineModel deleted'],
    ]);
    expect(rounds[0]).toMatchObject({
      runId: 'r1',
      startedAt: '2026-11-24T09:11:28.054Z',
      changes: ['Deployment created', 'Service created'],
      phaseAfter: 'Deploying',
      readiness: '0 of 2 ready, rollout starting',
      errors: [],
    });
    expect(rounds[0]!.durationMs).toBeGreaterThan(0);
    expect(rounds[1]).toMatchObject({
      phaseBefore: 'Deploying',
      phaseAfter: 'Ready',
      readiness: '2 of 2 ready, 2 updated',
    });
    expect(rounds[4]).toMatchObject({
      changes: ['Deployment updated: replicas 1 → 2'],
      phaseBefore: 'Ready',
      phaseAfter: 'Deploying',
    });
    expect(rounds.at(-1)).toMatchObject({ gone: true, steps: ['read MachineModel hist/plain'] });
  });

  it('names the events a coalesced signal stood for', () => {
    const [, second] = roundsOf('r1', recorded('retired/caddy-update-resync-outage-delete-before-read-and-apply.json'));
    expect(second!.triggers).toEqual(['Service added and 6 more events']);
  });

  it('counts a retried activity, its failure, and the finalizer and route removed', () => {
    const rounds = roundsOf('r1', recorded('retired/caddy-update-resync-outage-delete-before-read-and-apply.json'));
    expect(rounds[0]!.changes).toEqual(['finalizer added', 'Deployment created', 'Service created']);
    expect(rounds[1]!.changes).toEqual(['route /models/hist/published published']);
    const deletion = rounds.at(-1)!;
    expect(deletion.phaseAfter).toBe('Deleting');
    expect(deletion.steps).toContain('remove gateway route (retrying) (3 attempts)');
    expect(new Set(deletion.errors)).toEqual(
      new Set(['unregisterRoute: Caddy admin API at http://127.0.0.1:35647 is unreachable: ECONNREFUSED']),
    );
    // The finalizer's removal ran twice: the deleted signal came in as the first attempt's workflow task
    // completed (UnhandledCommand), so the retried task found it gone and changed nothing.
    expect(deletion.steps.slice(-2)).toEqual(['remove gateway route', 'remove finalizer']);
    expect(deletion.changes).toEqual([]);
  });

  it.each([
    ['the apply its read step was refused', 'deployment-not-owned.json'],
    ['the failed step', 'retired/deployment-not-owned-before-read-and-apply.json'],
  ])('says why a round failed once, from %s', (_, file) => {
    const [first] = roundsOf('r1', recorded(file));
    expect(first!.phaseAfter).toBe('Failed');
    expect(first!.errors).toEqual([
      'applyChildren: Deployment hist/taken exists and is not owned by this MachineModel; ' +
        'delete or rename it, or give the MachineModel another name',
    ]);
  });

  it('names the drift check and mmctl as triggers', () => {
    const triggers = roundsOf(
      'r1',
      recorded('retired/caddy-update-resync-outage-delete-before-read-and-apply.json'),
    ).flatMap((r) => r.triggers);
    expect(triggers).toContain('timer: idle: drift check in 10 s unless a change comes');
    expect(triggers).toContain('reconcileNow by mmctl (unknown user)');
  });

  it('names the fields an update changed', () => {
    const rounds = roundsOf('r1', recorded('retired/caddy-update-resync-outage-delete-before-read-and-apply.json'));
    expect(rounds.flatMap((r) => r.changes)).toEqual([
      'finalizer added',
      'Deployment created',
      'Service created',
      'route /models/hist/published published',
      'Deployment updated: image registry.example.com/models/classifier:v1 → registry.example.com/models/classifier:v2',
    ]);
    expect(rounds.at(-1)).toMatchObject({ phaseBefore: 'Ready', phaseAfter: 'Deleting' });
  });

  it('reads a round whose read step applied the children too (readAndApply), as it read the two steps', () => {
    const plain = roundsOf('r1', recorded('retired/no-gateway-update-drift-delete-before-report-with-apply.json'));
    expect(plain[0]).toMatchObject({
      changes: ['Deployment created', 'Service created'],
      phaseAfter: 'Deploying',
      readiness: '0 of 2 ready, rollout starting',
      errors: [],
    });
    expect(plain[1]).toMatchObject({
      phaseBefore: 'Deploying',
      phaseAfter: 'Ready',
      readiness: '2 of 2 ready, 2 updated',
    });
    expect(plain.at(-1)).toMatchObject({ gone: true });
    const published = roundsOf(
      'r1',
      recorded('retired/caddy-update-resync-outage-delete-before-report-with-apply.json'),
    );
    expect(published.flatMap((r) => r.changes)).toEqual([
      'finalizer added',
      'Deployment created',
      'Service created',
      'route /models/hist/published published',
      'Deployment updated: image registry.example.com/models/classifier:v1 → registry.example.com/models/classifier:v2',
    ]);
    // The first round adds the finalizer, so its read step only reads and the apply is a step of its own.
    expect(published[0]!.steps).toHaveLength(4);
    expect(published[2]!.steps).toHaveLength(2);
  });

  it('reads a round whose read step wrote the status too, as it read the status step', () => {
    const plain = roundsOf('r1', recorded('no-gateway-update-drift-delete.json'));
    expect(plain.map((r) => [r.phaseBefore, r.phaseAfter])).toEqual([
      [undefined, 'Deploying'],
      ['Deploying', 'Ready'],
      ['Ready', 'Deploying'],
      ['Deploying', 'Ready'],
      // The drift round restored the replicas, and the model got Ready again before it was deleted.
      ['Ready', 'Deploying'],
      ['Deploying', 'Ready'],
      ['Ready', undefined],
    ]);
    // Each round of a model without a gateway is one step, which carries the status step's summary.
    expect(plain[2]!.steps).toEqual([
      'read MachineModel hist/plain; apply its children and write its status if that is all it needs',
      'status Ready → Deploying · 2 of 2 ready, rollout starting · Deployment updated: image registry.example.com/models/classifier:v1 → registry.example.com/models/classifier:v2',
    ]);
    const published = roundsOf('r1', recorded('caddy-update-resync-outage-delete.json'));
    // On a gateway, the image update's round (not Ready, no route to publish) is one step too; a Ready
    // round publishes between the apply and the status.
    expect(published[2]).toMatchObject({ phaseBefore: 'Ready', phaseAfter: 'Deploying' });
    expect(published[2]!.steps).toHaveLength(2);
    expect(published[3]).toMatchObject({ phaseBefore: 'Deploying', phaseAfter: 'Ready' });
    expect(published[3]!.steps).toEqual([
      'read MachineModel hist/published; apply its children and write its status if that is all it needs',
      'publish on the gateway',
      'status Deploying → Ready · 1 of 1 ready, 1 updated',
    ]);
  });

  it('renders rounds for people', () => {
    const rounds = roundsOf('r1', recorded('retired/no-gateway-update-drift-delete-before-read-and-apply.json')).slice(
      2,
      3,
    );
    expect(renderHistory('hist/plain', rounds)).toMatch(
      /^hist\/plain: the last round, oldest first\n {2}2026-11-24 09:11:31Z, took \d+ms\n {4}trigger +MachineModel updated \(generation 2\)\n {4}changed +Deployment updated: image \S+ → \S+\n {4}phase +Ready → Deploying\n {4}saw +2 of 2 ready, rollout starting$/,
    );
  });
});
