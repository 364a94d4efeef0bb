! A formatted print whose read of p(5) happens inside libgfortran: the
! walk out of libgfortran must reach the print's line. Built as a shared
! object by the collector's unit tests (coherence::walk).
subroutine show(p, n) bind(c, name='show')
  use iso_c_binding, only: c_double, c_int
  integer(c_int), value :: n
  real(c_double), intent(in) :: p(n)
  print *, 'p(5) =', p(5) ! read: print
end subroutine show
