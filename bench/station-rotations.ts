// The stations group's password rotations (bench/stations.ts).
import { RPCClient } from 'ocpp-rpc';

export interface RotationFigures {
  count: number;
  p50Ms: number;
  p99Ms: number;
}

// Password rotations of one connected station, one after another: API call → SetVariables →
// the station's Accepted → 200. The station answers at once, so this is the service's own cost.
export async function rotationRoundTrips(apiBase: string, stationEndpoint: string, token: string, station: [string, string], count: number): Promise<RotationFigures> {
  const [id, password] = station;
  const client = new RPCClient({ endpoint: stationEndpoint, identity: id, password, protocols: ['ocpp2.0.1'], strictMode: false, reconnect: false } as never) as unknown as {
    connect(): Promise<unknown>;
    handle(method: string, handler: (call: { params: { setVariableData: Array<{ component: unknown; variable: unknown }> } }) => unknown): void;
    close(o: object): Promise<unknown>;
  };
  client.handle('SetVariables', ({ params }) => ({
    setVariableResult: [{ attributeStatus: 'Accepted', component: params.setVariableData[0]!.component, variable: params.setVariableData[0]!.variable }],
  }));
  await client.connect();
  const times: number[] = [];
  try {
    // The first few warm up the routes and the statements.
    for (let i = 0; i < count + 10; i++) {
      const started = performance.now();
      const res = await fetch(`${apiBase}/asset-management/v1/assets/change-password`, {
        method: 'POST',
        headers: { authorization: token, 'content-type': 'application/json' },
        body: JSON.stringify({ id }),
      });
      await res.arrayBuffer();
      if (res.status !== 200) throw new Error(`rotation answered ${res.status}`);
      if (i >= 10) times.push(performance.now() - started);
    }
  } finally {
    await client.close({ force: true });
  }
  times.sort((a, b) => a - b);
  const pct = (q: number) => times[Math.min(times.length - 1, Math.max(0, Math.ceil(q * times.length) - 1))]!;
  return { count, p50Ms: pct(0.5), p99Ms: pct(0.99) };
}
