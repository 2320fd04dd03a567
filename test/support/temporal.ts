import type { Connection } from '@temporalio/client';
import proto from '@temporalio/proto';
import { searchAttributes } from '../../deploy/local/stack.js';

/** The time-skipping server starts without custom search attributes; the workflow upserts them. */
export async function registerSearchAttributes(connection: Connection, namespace = 'default'): Promise<void> {
  const keyword = proto.temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD;
  await connection.operatorService.addSearchAttributes({
    namespace,
    searchAttributes: Object.fromEntries(searchAttributes.map((name) => [name, keyword])),
  });
}
