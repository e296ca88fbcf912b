import * as tf from "@tensorflow/tfjs";
import { selectBackend, PolicyModel, Tokenizer, ChatTemplate } from "/work/main/packages/trainer-gpu/src/index.ts";
await selectBackend();
const tok = new Tokenizer();
const m = PolicyModel.create({ vocabSize: tok.vocabSize, dModel: 32, nLayers: 2, nHeads: 4, contextLength: 64, seed: 1 });
console.log("params", m.parameterCount, tok.vocabSize);
const tpl = new ChatTemplate(tok);
const enc = tpl.encodeChat([{ role: "user", content: "hi there" }]);
const ids = enc.ids;
const full = tf.tidy(() => m.tokenLogProbs([ids]).arraySync()[0]);
const { logits, cache } = m.prefill(ids.slice(0, 5));
const lp = (l: Float32Array, t: number) => { const mx = Math.max(...l); const z = l.reduce((a, b) => a + Math.exp(b - mx), 0); return l[t] - mx - Math.log(z); };
console.log(lp(logits, ids[5]), full[4]);
let c = cache;
for (let p = 5; p < ids.length - 1; p++) {
  const bias = tf.zeros([1, 1, 1, p + 1]) as tf.Tensor4D;
  const r = m.decodeStep([ids[p]], [p], c, bias);
  console.log(p, lp(r.logits, ids[p + 1]), full[p]);
  c = r.cache;
}
const opt = tf.train.adam(1e-3);
const t0 = Date.now();
for (let i = 0; i < 3; i++) {
  const loss = opt.minimize(() => tf.neg(tf.mean(m.tokenLogProbs([ids, ids]))), true, m.trainableVariables);
  console.log("loss", loss!.dataSync()[0]);
}
console.log("ms", Date.now() - t0, tf.memory().numTensors);
