import { describe, expect, it } from 'vitest';
import { temporalErrorReason } from '../../src/process/temporal.js';

// Messages as the worker's connection (Temporal's Rust core, tonic/hyper) reports them.
describe('temporalErrorReason', () => {
  it.each([
    [
      'tonic::transport::Error(Transport, ConnectError(ConnectError("tcp connect error", 127.0.0.1:1, Os { code: 111, kind: ConnectionRefused, message: "Connection refused" })))',
      'Connection refused',
    ],
    [
      'tonic::transport::Error(Transport, ConnectError(ConnectError("dns error", Custom { kind: Uncategorized, error: "failed to lookup address information: Name or service not known" })))',
      'failed to lookup address information: Name or service not known',
    ],
    [
      `Failed to call GetSystemInfo: code: 'Unknown error', message: "transport error", source: tonic::transport::Error(Transport, hyper::Error(Io, Kind(ConnectionReset)))`,
      'connection reset',
    ],
    [
      `Failed to call GetSystemInfo: code: 'Unknown error', message: "transport error", source: tonic::transport::Error(Transport, hyper::Error(Io, Custom { kind: BrokenPipe, error: "stream closed because of a broken pipe" }))`,
      'stream closed because of a broken pipe',
    ],
    [
      `Failed to call GetSystemInfo: code: 'The operation was cancelled', message: "operation was canceled", source: tonic::transport::Error(Transport, hyper::Error(Canceled, "connection closed"))`,
      'connection closed',
    ],
    ['tonic::transport::Error(Transport, Something)', 'transport error'],
    ['14 UNAVAILABLE: No connection established\nmore', '14 UNAVAILABLE: No connection established'],
  ])('%s', (message, reason) => {
    expect(temporalErrorReason(new Error(message))).toBe(reason);
  });
});
