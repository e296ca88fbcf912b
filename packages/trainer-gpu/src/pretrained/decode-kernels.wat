(module
  ;; The tfjs-wasm backend's heap: every pointer below is a byte offset into it.
  (import "env" "memory" (memory 0))

  ;; out[r,:] = x[r,:] / sqrt(mean(x[r,:]^2) + eps) * w; x, out [rows,d], w [d]; d a multiple of 4.
  (func (export "rmsnorm")
    (param $x i32) (param $w i32) (param $out i32) (param $rows i32) (param $d i32) (param $eps f32)
    (local $r i32) (local $xi i32) (local $xend i32) (local $wi i32) (local $oi i32)
    (local $acc v128) (local $inv v128) (local $v v128) (local $rowBytes i32) (local $ss f32)
    (local.set $rowBytes (i32.shl (local.get $d) (i32.const 2)))
    (local.set $r (i32.const 0))
    (block $rdone (loop $rloop
      (br_if $rdone (i32.ge_u (local.get $r) (local.get $rows)))
      (local.set $xi (i32.add (local.get $x) (i32.mul (local.get $r) (local.get $rowBytes))))
      (local.set $xend (i32.add (local.get $xi) (local.get $rowBytes)))
      (local.set $acc (v128.const f32x4 0 0 0 0))
      (loop $sloop
        (local.set $v (v128.load (local.get $xi)))
        (local.set $acc (f32x4.add (local.get $acc) (f32x4.mul (local.get $v) (local.get $v))))
        (local.set $xi (i32.add (local.get $xi) (i32.const 16)))
        (br_if $sloop (i32.lt_u (local.get $xi) (local.get $xend))))
      (local.set $ss
        (f32.add
          (f32.add (f32x4.extract_lane 0 (local.get $acc)) (f32x4.extract_lane 1 (local.get $acc)))
          (f32.add (f32x4.extract_lane 2 (local.get $acc)) (f32x4.extract_lane 3 (local.get $acc)))))
      (local.set $inv (f32x4.splat
        (f32.div (f32.const 1)
          (f32.sqrt (f32.add (f32.div (local.get $ss) (f32.convert_i32_u (local.get $d))) (local.get $eps))))))
      (local.set $xi (i32.sub (local.get $xend) (local.get $rowBytes)))
      (local.set $wi (local.get $w))
      (local.set $oi (i32.add (local.get $out) (i32.mul (local.get $r) (local.get $rowBytes))))
      (loop $nloop
        (v128.store (local.get $oi)
          (f32x4.mul (f32x4.mul (v128.load (local.get $xi)) (local.get $inv)) (v128.load (local.get $wi))))
        (local.set $xi (i32.add (local.get $xi) (i32.const 16)))
        (local.set $wi (i32.add (local.get $wi) (i32.const 16)))
        (local.set $oi (i32.add (local.get $oi) (i32.const 16)))
        (br_if $nloop (i32.lt_u (local.get $xi) (local.get $xend))))
      (local.set $r (i32.add (local.get $r) (i32.const 1)))
      (br $rloop))))

  ;; Rotate-half rotary embeddings of x [B,H,T,dh] over its first `rot` dimensions:
  ;;   out[j] = x[j] cos[j] + x[j+rot/2] sin[j],  out[j+rot/2] = x[j+rot/2] cos[j+rot/2] + x[j] sin[j+rot/2]
  ;; (sin carries the sign), the rest copied. cos, sin [B|1,1,T,rot] (`tableStride` 0: one table for all
  ;; rows, else T*rot); rot a multiple of 8, dh of 4.
  (func (export "rotary")
    (param $x i32) (param $cos i32) (param $sin i32) (param $out i32)
    (param $B i32) (param $H i32) (param $T i32) (param $dh i32) (param $rot i32) (param $tableStride i32)
    (local $b i32) (local $h i32) (local $t i32) (local $j i32) (local $half i32)
    (local $xp i32) (local $op i32) (local $cp i32) (local $sp i32) (local $x1 v128) (local $x2 v128)
    (local.set $half (i32.shr_u (local.get $rot) (i32.const 1)))
    (local.set $xp (local.get $x))
    (local.set $op (local.get $out))
    (local.set $b (i32.const 0))
    (block $bdone (loop $bloop
      (br_if $bdone (i32.ge_u (local.get $b) (local.get $B)))
      (local.set $h (i32.const 0))
      (block $hdone (loop $hloop
        (br_if $hdone (i32.ge_u (local.get $h) (local.get $H)))
        (local.set $t (i32.const 0))
        (block $tdone (loop $tloop
          (br_if $tdone (i32.ge_u (local.get $t) (local.get $T)))
          (local.set $cp (i32.add (local.get $cos) (i32.shl
            (i32.add (i32.mul (local.get $b) (local.get $tableStride)) (i32.mul (local.get $t) (local.get $rot)))
            (i32.const 2))))
          (local.set $sp (i32.add (local.get $sin) (i32.sub (local.get $cp) (local.get $cos))))
          (local.set $j (i32.const 0))
          (block $jdone (loop $jloop
            (br_if $jdone (i32.ge_u (local.get $j) (local.get $half)))
            (local.set $x1 (v128.load (i32.add (local.get $xp) (i32.shl (local.get $j) (i32.const 2)))))
            (local.set $x2 (v128.load (i32.add (local.get $xp)
              (i32.shl (i32.add (local.get $j) (local.get $half)) (i32.const 2)))))
            (v128.store (i32.add (local.get $op) (i32.shl (local.get $j) (i32.const 2)))
              (f32x4.add
                (f32x4.mul (local.get $x1) (v128.load (i32.add (local.get $cp) (i32.shl (local.get $j) (i32.const 2)))))
                (f32x4.mul (local.get $x2) (v128.load (i32.add (local.get $sp) (i32.shl (local.get $j) (i32.const 2)))))))
            (v128.store (i32.add (local.get $op) (i32.shl (i32.add (local.get $j) (local.get $half)) (i32.const 2)))
              (f32x4.add
                (f32x4.mul (local.get $x2) (v128.load (i32.add (local.get $cp)
                  (i32.shl (i32.add (local.get $j) (local.get $half)) (i32.const 2)))))
                (f32x4.mul (local.get $x1) (v128.load (i32.add (local.get $sp)
                  (i32.shl (i32.add (local.get $j) (local.get $half)) (i32.const 2)))))))
            (local.set $j (i32.add (local.get $j) (i32.const 4)))
            (br $jloop)))
          (local.set $j (local.get $rot))
          (block $cdone (loop $cloop
            (br_if $cdone (i32.ge_u (local.get $j) (local.get $dh)))
            (v128.store (i32.add (local.get $op) (i32.shl (local.get $j) (i32.const 2)))
              (v128.load (i32.add (local.get $xp) (i32.shl (local.get $j) (i32.const 2)))))
            (local.set $j (i32.add (local.get $j) (i32.const 4)))
            (br $cloop)))
          (local.set $xp (i32.add (local.get $xp) (i32.shl (local.get $dh) (i32.const 2))))
          (local.set $op (i32.add (local.get $op) (i32.shl (local.get $dh) (i32.const 2))))
          (local.set $t (i32.add (local.get $t) (i32.const 1)))
          (br $tloop)))
        (local.set $h (i32.add (local.get $h) (i32.const 1)))
        (br $hloop)))
      (local.set $b (i32.add (local.get $b) (i32.const 1)))
      (br $bloop))))
)
