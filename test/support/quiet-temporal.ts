import { DefaultLogger, Runtime } from '@temporalio/worker';

// Worker state changes and bundle statistics drown test output; warnings and errors still show.
Runtime.install({ logger: new DefaultLogger('WARN') });
