// Reading recorded histories (`temporal workflow show -o json` form) in tests.

export interface RecordedHistory {
  events: {
    workflowExecutionStartedEventAttributes?: {
      input?: { payloads?: { data?: string }[] };
      taskQueue?: { name?: string };
    };
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

/** The activity types of a history's local-activity markers, in order. */
export function localActivitiesOf(history: RecordedHistory): string[] {
  return history.events.flatMap((e) => {
    const data = e.markerRecordedEventAttributes?.details?.data?.payloads?.[0]?.data;
    const marker = data ? (JSON.parse(Buffer.from(data, 'base64').toString('utf8')) as { activity_type?: string }) : {};
    return marker.activity_type ? [marker.activity_type] : [];
  });
}
