import { selectBackend, tf, mm } from "/work/main/packages/trainer-gpu/src/index.ts";
import { mmNT } from "/work/main/packages/trainer-gpu/src/model/ops.ts";
await selectBackend({ log: () => {} });
const q = tf.variable(tf.randomNormal([32, 4, 64, 16])), k = tf.variable(tf.randomNormal([32, 4, 64, 16]));
function bench(name: string, f: () => tf.Scalar) {
  let best = 1e9;
  for (let i = 0; i < 10; i++) { const t0 = performance.now(); const { value, grads } = tf.variableGrads(f, [q, k]); value.dataSync(); tf.dispose([value, grads]); if (i > 1) best = Math.min(best, performance.now() - t0); }
  console.log(name, best.toFixed(2), "ms");
}
for (let r = 0; r < 2; r++) {
bench("explicit kT mm", () => tf.sum(tf.square(mm(q, tf.transpose(k, [0, 1, 3, 2])))) as tf.Scalar);
bench("mmNT", () => tf.sum(tf.square(mmNT(q, k))) as tf.Scalar);
}
