! The OpenACC API routines from Fortran: GCC's `openacc` module reaches the
! C routines through wrappers inside libgomp, so the collector sees libgomp
! as the caller and must find the application's line on the stack. Each
! call is marked `api: NAME` (with `xN` when it runs N times).
program api_routines
  use openacc
  implicit none
  real(8) :: a(256)
  integer :: i
  a = 1.0d0
  call acc_copyin(a) ! api: acc_copyin
  do i = 1, 2
    a(1) = i
    call acc_update_device(a) ! api: acc_update_device x2
  end do
  call acc_update_self(a) ! api: acc_update_self
  call acc_copyout(a) ! api: acc_copyout
  print '(a, f8.1)', 'sum:', sum(a)
end program api_routines
