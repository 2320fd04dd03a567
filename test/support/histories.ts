// Reading recorded histories (`temporal workflow show -o json` form) in tests.

export interface RecordedHistory {
  events: {
    workflowExecutionStartedEventAttributes?: { input?: { payloads?: { data?: string }[] } };
    markerRecordedEventAttributes?: { details?: Record<string, { payloads?: { data?: string }[] }> };
  }[];
}

/** The patch ids of a history's patch markers, in order. */
export function patchMarkersOf(history: RecordedHistory): string[] {
  return history.events.flatMap((e) => {
    const data = e.markerRecordedEventAttributes?.details?.['patch-data']?.payloads?.[0]?.data;
    return data ? [(JSON.parse(Buffer.from(data, 'base64').toString('utf8')) as { id: string }).id] : [];
  });
}
