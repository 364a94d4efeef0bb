/* caller_files.h - what caller_files.c calls in caller_files_step.c. */
#ifndef CALLER_FILES_H
#define CALLER_FILES_H
void heat_step(int nx, int ny, const double *restrict u, double *restrict unew);
#endif
