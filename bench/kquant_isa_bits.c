/* bench/kquant_isa_bits.c — a hash of every K-quant decode and prefill kernel's output bits (gemv_kquant_avx2.c) on
 * fixed random blocks, row counts 1..37 (pairs and the odd row), 7 prefill tokens; and whether prefill equals
 * decode. bench/kquant-isa-bits.sh builds it for each instruction-set path (AVX2 only, + GFNI, + AVX-512VL,
 * native) and compares the hashes: the integer sums are exact, so every path must give the same bits. Then the same
 * for the 32-element types against the Q8_0 activation form (tg_quantize_q8x's blocks, with their fp16 scale and sum
 * term, hashed too; Q8_0 / Q4_0: gemv_avx2.c, VNNI dpbusd where the target has it; Q4_1 / Q5_0 / Q5_1 / IQ4_NL:
 * gemv_q32_avx2.c). Not part of the tests (it needs several builds). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kernels/avx2.h"
#include "kernels/quant.h"
#include "util/half.h"
typedef void (*gemv)(const uint8_t*,size_t,int64_t,const void*,int64_t,float*);
typedef void (*gemm)(const uint8_t*,size_t,int64_t,const tg_q8k_block*,int64_t,int64_t,float*,size_t);
int main(void) { int rows=37, cols=1024; uint64_t s=7; unsigned long long h=1469598103934665603ull;
 struct {gemv f; gemm g; int bb, sc0, sc1;} ty[]={{tg_avx2_gemv_q2_k,tg_avx2_gemm_q8k_q2_k,84,80,82},{tg_avx2_gemv_q3_k,tg_avx2_gemm_q8k_q3_k,110,108,-1},{tg_avx2_gemv_q4_k,tg_avx2_gemm_q8k_q4_k,144,0,2},{tg_avx2_gemv_q5_k,tg_avx2_gemm_q8k_q5_k,176,0,2},{tg_avx2_gemv_q6_k,tg_avx2_gemm_q8k_q6_k,210,208,-1}};
 int nt=7; float *x=malloc(cols*nt*4), *y=malloc(rows*nt*4); for(int i=0;i<cols*nt;i++){s=s*6364136223846793005ull+1442695040888963407ull; x[i]=(float)((int)(s>>40)%2001-1000)/1000.f;}
 tg_q8k_block *xk=malloc(sizeof(tg_q8k_block)*cols/256*nt); for(int t=0;t<nt;t++) tg_quantize_q8k(x+t*cols,xk+t*cols/256,cols);
 for(int k=0;k<5;k++){ size_t rb=(size_t)ty[k].bb*cols/256; uint8_t*w=malloc(rb*rows);
  for(size_t i=0;i<rb*rows;i++){s=s*6364136223846793005ull+1442695040888963407ull; w[i]=(uint8_t)(s>>33);}
  for(size_t b=0;b<rb*rows/ty[k].bb;b++){uint16_t hh=tg_f32_to_f16(0.001f*(float)(b%7+1)); memcpy(w+b*ty[k].bb+ty[k].sc0,&hh,2); if(ty[k].sc1>=0) memcpy(w+b*ty[k].bb+ty[k].sc1,&hh,2);}
  for(int nr=1;nr<=rows;nr+=nr<4?1:11){ ty[k].f(w,rb,nr,xk,cols,y); for(int i=0;i<nr*4;i++) h=(h^((unsigned char*)y)[i])*1099511628211ull; }
  ty[k].g(w,rb,rows,xk,cols/256,nt,y,rows); for(int i=0;i<rows*nt*4;i++) h=(h^((unsigned char*)y)[i])*1099511628211ull;
  /* prefill == decode */ float *yd=malloc(rows*4); int bad=0; for(int t=0;t<nt;t++){ ty[k].f(w,rb,rows,xk+t*cols/256,cols,yd); bad+=memcmp(yd,y+t*rows,rows*4)!=0; }
  printf("type %d hash %016llx prefill-vs-decode mismatches %d\n",k,h,bad); free(w); free(yd);}
 tg_q8x_block *xq=malloc(sizeof(tg_q8x_block)*cols/32); tg_quantize_q8x(x,xq,cols);
 for(int b=0;b<cols/32;b++){ h=(h^(unsigned long long)tg_f32_to_bits(xq[b].d))*1099511628211ull; h=(h^(unsigned long long)tg_f32_to_bits(xq[b].s))*1099511628211ull; for(int j=0;j<32;j++) h=(h^(unsigned char)xq[b].q[j])*1099511628211ull; }
 printf("q8x blocks hash %016llx\n",h);
 struct {gemv f; int bb, m_at;} t32[]={{tg_avx2_gemv_q8_0,34,-1},{tg_avx2_gemv_q4_0,18,-1},{tg_avx2_gemv_q4_1,20,2},{tg_avx2_gemv_q5_0,22,-1},{tg_avx2_gemv_q5_1,24,2},{tg_avx2_gemv_iq4_nl,18,-1}};
 for(int k=0;k<6;k++){ size_t rb=(size_t)t32[k].bb*cols/32; uint8_t*w=malloc(rb*rows);
  for(size_t i=0;i<rb*rows;i++){s=s*6364136223846793005ull+1442695040888963407ull; w[i]=(uint8_t)(s>>33);}
  for(size_t b=0;b<rb*rows/t32[k].bb;b++){uint16_t hh=tg_f32_to_f16(0.001f*(float)(b%7+1)); memcpy(w+b*t32[k].bb,&hh,2); if(t32[k].m_at>=0) memcpy(w+b*t32[k].bb+t32[k].m_at,&hh,2);}
  for(int nr=1;nr<=rows;nr+=nr<4?1:11){ t32[k].f(w,rb,nr,xq,cols,y); for(int i=0;i<nr*4;i++) h=(h^((unsigned char*)y)[i])*1099511628211ull; }
  printf("32-element type %d hash %016llx\n",k,h); free(w);}
 return 0; }
