# Sourced by the NPB scripts of bench/ (npb.sh, npb_coherence.sh,
# npb_patches.sh): how a copy of the University of Houston OpenACC port of
# NPB 3.3 is set up to build with GCC.

# npb_make_def PROGDIR CC FLAGS BINDIR: writes PROGDIR/config/make.def.
# The port's own picks flags by $(CC) (uhcc, pgcc, cc, gcc, icc) and its
# gcc entry has no -fopenacc; BINDIR is where its make.common puts
# PROG.CLASS.x.
npb_make_def() {
  cat > "$1/config/make.def" <<MK
CC = $2
UCC = $2
CFLAGS = $3
CLINK = $2
CLINKFLAGS = $3
C_LIB = -lm
C_INC = -I../common
BINDIR = $4
RAND = randdp
WTIME = wtime.c
MK
}
