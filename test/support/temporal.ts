import type { Connection } from '@temporalio/client';
import proto from '@temporalio/proto';
import { operatorSearchAttributes } from '../../workflows/search-attributes.js';

/** The time-skipping server starts without custom search attributes; the workflow upserts them. */
export async function registerSearchAttributes(connection: Connection, namespace = 'default'): Promise<void> {
  const types = proto.temporal.api.enums.v1.IndexedValueType;
  await connection.operatorService.addSearchAttributes({
    namespace,
    searchAttributes: Object.fromEntries(
      operatorSearchAttributes.map((key) => [key.name, types[`INDEXED_VALUE_TYPE_${key.type}`]]),
    ),
  });
}
