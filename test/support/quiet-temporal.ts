import { DefaultLogger, makeTelemetryFilterString, Runtime, type LogEntry } from '@temporalio/worker';
import { beforeEach } from 'vitest';

// The SDK's warnings and errors in a test, its native core's included (an activity failure the test provokes on purpose, with its
// stack) are held, and printed only when that test fails: a passing run reads as a list of tests.
// Worker state changes and bundle statistics (INFO) are dropped.
// The runtime is one a process, and the fast tier runs its files one after another in each of its
// processes (isolate: false): the first file installs it, the rest share its held records.
const shared = globalThis as { quietTemporalRecords?: LogEntry[] };
const held: LogEntry[] = shared.quietTemporalRecords ?? [];
if (!shared.quietTemporalRecords) {
  shared.quietTemporalRecords = held;
  Runtime.install({
    logger: new DefaultLogger('WARN', (entry) => held.push(entry)),
    // The native core's own records (the test server's missing capabilities, ...) go the same way.
    telemetryOptions: { logging: { filter: makeTelemetryFilterString({ core: 'WARN' }), forward: {} } },
  });
}

const line = (e: LogEntry) => `${e.level} ${e.message}${e.meta ? ` ${JSON.stringify(e.meta)}` : ''}`;

beforeEach((context) => {
  held.length = 0;
  context.onTestFailed(() => {
    if (held.length) console.warn(`Temporal SDK records during this test:\n${held.map(line).join('\n')}`);
  });
});
